"""Job trees are run on SQL only (tests/db, tests/e2e); the in-memory unit of work's fast tests
create no children, and a store call here says a test reached one."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler_service.core.trees import ChildOutcome
from scheduler_service.ports.trees import TreeNodeRow, TreeStore, TreeUsage


class FakeTreeStore(TreeStore):
    def _sql_only(self) -> NotImplementedError:
        return NotImplementedError("job trees run on the SQL store (tests/db, tests/e2e)")

    async def children_ended(self, parents: Sequence[tuple[str, int, int]]) -> None:
        raise self._sql_only()

    async def requeue_joined(self, parent_ids: Sequence[str]) -> None:
        raise self._sql_only()

    async def held_children(self, parent_job_id: str) -> int:
        raise self._sql_only()

    async def hold(self, job_ids: Sequence[str]) -> None:
        raise self._sql_only()

    async def release_held(self, parent_job_id: str, count: int) -> list[str]:
        raise self._sql_only()

    async def children(self, parent_job_id: str) -> list[ChildOutcome]:
        raise self._sql_only()

    async def children_of(self, parent_job_ids: Sequence[str]) -> dict[str, list[ChildOutcome]]:
        raise self._sql_only()

    async def child_counts(self, parent_job_id: str) -> dict[str, int]:
        raise self._sql_only()

    async def unsuccessful_children(self, parent_job_id: str) -> list[tuple[str, str]]:
        raise self._sql_only()

    async def nodes(self, root_job_id: str) -> list[TreeNodeRow]:
        raise self._sql_only()

    async def usage(self, job_ids: Sequence[str]) -> TreeUsage:
        raise self._sql_only()

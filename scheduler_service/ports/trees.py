"""The job trees' port (``tx.trees``): a parent's children, held children, a whole tree and its
usage. The parent's own state moves through the lifecycle writes (``core/tree_writes.py``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler_service.core.trees import ChildOutcome

__all__ = ["TreeNodeRow", "TreeStore", "TreeUsage"]


@dataclass(frozen=True, slots=True)
class TreeNodeRow:
    job_id: str
    parent_job_id: str | None
    job_type: str
    lifecycle_status: str
    attempt_count: int
    error_code: str | None = None


@dataclass(frozen=True, slots=True)
class TreeUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost_micros: int = 0


class TreeStore(ABC):
    @abstractmethod
    async def children_ended(self, parents: Sequence[tuple[str, int, int]]) -> None:
        """CHILDREN_ENDED of several waiting parents this transaction locked, in one write: each
        (parent id, children ended (negative), progress)."""

    @abstractmethod
    async def requeue_joined(self, parent_ids: Sequence[str]) -> None:
        """JOIN_REQUEUE of several parents this transaction locked and joined, in one write."""

    @abstractmethod
    async def held_children(self, parent_job_id: str) -> int:
        """The parent's queued children held back by its ``max_parallel``."""

    @abstractmethod
    async def hold(self, job_ids: Sequence[str]) -> None:
        """Hold these new children back (no ``availableAt``) until siblings end."""

    @abstractmethod
    async def release_held(self, parent_job_id: str, count: int) -> list[str]:
        """Make up to ``count`` of the parent's held children available, oldest first."""

    @abstractmethod
    async def children(self, parent_job_id: str) -> list[ChildOutcome]:
        """The parent's children in creation order, with their outputs."""

    @abstractmethod
    async def children_of(self, parent_job_ids: Sequence[str]) -> dict[str, list[ChildOutcome]]:
        """Several parents' children, each parent's in creation order, with their outputs."""

    @abstractmethod
    async def child_counts(self, parent_job_id: str) -> dict[str, int]:
        """The parent's children by lifecycle status."""

    @abstractmethod
    async def unsuccessful_children(self, parent_job_id: str) -> list[tuple[str, str]]:
        """The parent's failed and cancelled children, in creation order, with their codes."""

    @abstractmethod
    async def nodes(self, root_job_id: str) -> list[TreeNodeRow]:
        """The root and every job below it, the root first, then in creation order."""

    @abstractmethod
    async def usage(self, job_ids: Sequence[str]) -> TreeUsage:
        """The usage ledger summed over these jobs' attempts."""

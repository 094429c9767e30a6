"""Job trees on SQL: a parent's children through ``idx_parentJobId``, a whole tree through
``idx_rootJobId``, its usage through the ledger's job index."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table, bindparam, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.core.state_machine import LifecycleStatus, parse_status
from scheduler_service.core.tree_writes import CHILDREN_ENDED, JOIN_REQUEUE
from scheduler_service.core.trees import SPLIT_TRIGGER, ChildOutcome
from scheduler_service.ports.trees import TreeNodeRow, TreeStore, TreeUsage
from scheduler_service.sql import job_statements as sql
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.models import AiUsageLog
from scheduler_service.sql.job_store import write_many

__all__ = ["SqlTreeStore"]

_c = sql.jobs.c
_usage = cast(Table, AiUsageLog.__table__)
_QUEUED = LifecycleStatus.QUEUED.value
_ENDED_VALUES = frozenset({"ended", "progress"})
_of_parent = _c.parentJobId == bindparam("b_parent")
_held = (_c.lifecycleStatus == _QUEUED) & _c.availableAt.is_(None)

_HELD_COUNT = select(func.count()).where(_of_parent, _held)
_HELD_OLDEST = (
    select(_c.id)
    .where(_of_parent, _held)
    .order_by(_c.createdAt, _c.id)
    .limit(bindparam("b_limit"))
    .with_for_update()
)
_CHILDREN = (
    select(_c.id, _c.lifecycleStatus, _c.errorCode, _c.validatedOutput, _c.triggerType)
    .where(_of_parent)
    .order_by(_c.createdAt, _c.id)
)
_CHILDREN_OF = (
    select(
        _c.parentJobId,
        _c.id,
        _c.lifecycleStatus,
        _c.errorCode,
        _c.validatedOutput,
        _c.triggerType,
    )
    .where(_c.parentJobId.in_(bindparam("b_parents", expanding=True)))
    .order_by(_c.parentJobId, _c.createdAt, _c.id)
)
_COUNTS = select(_c.lifecycleStatus, func.count()).where(_of_parent).group_by(_c.lifecycleStatus)
_UNSUCCESSFUL = (
    select(_c.id, _c.errorCode)
    .where(
        _of_parent,
        _c.lifecycleStatus.in_([LifecycleStatus.FAILED.value, LifecycleStatus.CANCELLED.value]),
    )
    .order_by(_c.createdAt, _c.id)
)
_NODES = (
    select(_c.id, _c.parentJobId, _c.jobType, _c.lifecycleStatus, _c.attemptCount, _c.errorCode)
    .where(or_(_c.id == bindparam("b_root"), _c.rootJobId == bindparam("b_root")))
    .order_by(_c.treeDepth, _c.createdAt, _c.id)
)
_USAGE = select(
    func.coalesce(func.sum(_usage.c.promptTokens), 0),
    func.coalesce(func.sum(_usage.c.completionTokens), 0),
    func.coalesce(func.sum(_usage.c.cachedPromptTokens), 0),
    func.coalesce(func.sum(_usage.c.costMicros), 0),
).where(_usage.c.jobId.in_(bindparam("b_ids", expanding=True)))


def _outcome(row: Any) -> ChildOutcome:
    return ChildOutcome(
        row.id,
        parse_status(row.lifecycleStatus),
        row.errorCode,
        row.validatedOutput,
        split=row.triggerType == SPLIT_TRIGGER,
    )


class SqlTreeStore(TreeStore):
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def children_ended(self, parents: Sequence[tuple[str, int, int]]) -> None:
        rows = [
            {"i": parent, "v_ended": ended, "v_progress": progress}
            for parent, ended, progress in parents
        ]
        await write_many(self._conn, CHILDREN_ENDED, frozenset(), _ENDED_VALUES, rows)

    async def requeue_joined(self, parent_ids: Sequence[str]) -> None:
        rows = [{"i": parent} for parent in parent_ids]
        await write_many(self._conn, JOIN_REQUEUE, frozenset(), frozenset(), rows)

    async def held_children(self, parent_job_id: str) -> int:
        return int(
            (await self._conn.execute(_HELD_COUNT, {"b_parent": parent_job_id})).scalar_one()
        )

    async def hold(self, job_ids: Sequence[str]) -> None:
        if job_ids:
            await self._conn.execute(
                update(sql.jobs).where(_c.id.in_(job_ids)).values(availableAt=None)
            )

    async def release_held(self, parent_job_id: str, count: int) -> list[str]:
        if count <= 0:
            return []
        ids = list(
            (
                await self._conn.execute(
                    _HELD_OLDEST, {"b_parent": parent_job_id, "b_limit": count}
                )
            ).scalars()
        )
        if ids:
            await self._conn.execute(
                update(sql.jobs)
                .where(_c.id.in_(ids), _held)
                .values(availableAt=db_now(), queuedAt=db_now())
            )
        return ids

    async def children(self, parent_job_id: str) -> list[ChildOutcome]:
        rows = await self._conn.execute(_CHILDREN, {"b_parent": parent_job_id})
        return [_outcome(r) for r in rows]

    async def children_of(self, parent_job_ids: Sequence[str]) -> dict[str, list[ChildOutcome]]:
        rows = await self._conn.execute(_CHILDREN_OF, {"b_parents": sorted(parent_job_ids)})
        found: dict[str, list[ChildOutcome]] = {}
        for r in rows:
            found.setdefault(r.parentJobId, []).append(_outcome(r))
        return found

    async def child_counts(self, parent_job_id: str) -> dict[str, int]:
        rows = await self._conn.execute(_COUNTS, {"b_parent": parent_job_id})
        return {str(status): int(count) for status, count in rows}

    async def unsuccessful_children(self, parent_job_id: str) -> list[tuple[str, str]]:
        rows = await self._conn.execute(_UNSUCCESSFUL, {"b_parent": parent_job_id})
        return [(r.id, r.errorCode or "") for r in rows]

    async def nodes(self, root_job_id: str) -> list[TreeNodeRow]:
        rows = await self._conn.execute(_NODES, {"b_root": root_job_id})
        return [
            TreeNodeRow(
                r.id,
                r.parentJobId,
                r.jobType,
                r.lifecycleStatus,
                int(r.attemptCount),
                r.errorCode,
            )
            for r in rows
        ]

    async def usage(self, job_ids: Sequence[str]) -> TreeUsage:
        if not job_ids:
            return TreeUsage()
        row = (await self._conn.execute(_USAGE, {"b_ids": list(job_ids)})).one()
        return TreeUsage(int(row[0]), int(row[1]), int(row[2]), int(row[3]))

"""Warm-up of shared prompt prefixes on SQL: a user's jobs of one prefix, found through the
per-user index (``idx_userId_lifecycleStatus_parentJobId``) and their ``prefixKey``."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from sqlalchemy import ColumnElement, and_, case, func, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.ports.warmups import Group, WarmupStore
from scheduler_service.sql import job_statements as sql
from scheduler_service.sql.db.clock import db_now

__all__ = ["SqlWarmupStore"]

_c = sql.jobs.c
_ACTIVE = [LifecycleStatus.QUEUED.value, LifecycleStatus.RUNNING.value]


def _of(groups: Collection[Group]) -> ColumnElement[bool]:
    return tuple_(_c.userId, _c.prefixKey).in_(sorted(groups))


class SqlWarmupStore(WarmupStore):
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def warming(
        self, groups: Collection[Group], within_s: float, warm_for_s: float
    ) -> tuple[set[Group], set[Group]]:
        if not groups:
            return set(), set()
        leading = and_(
            _c.lifecycleStatus.in_(_ACTIVE), _c.createdAt >= db_now(-round(within_s * 1000))
        )
        warmed = _c.prefixWarmedAt >= db_now(-round(warm_for_s * 1000))
        rows = await self._conn.execute(
            select(
                _c.userId,
                _c.prefixKey,
                func.max(case((leading, 1), else_=0)),
                func.max(case((warmed, 1), else_=0)),
            )
            .where(_c.userId.in_(sorted({user for user, _ in groups})), _of(groups))
            .group_by(_c.userId, _c.prefixKey)
        )
        warming: set[Group] = set()
        warm: set[Group] = set()
        for user, key, leads, is_warm in rows:
            group = (str(user), str(key))
            if is_warm:
                warm.add(group)
            elif leads:
                warming.add(group)
        return warming, warm

    async def hold(self, job_ids: Sequence[str], wait_s: float) -> None:
        if job_ids:
            await self._conn.execute(
                update(sql.jobs)
                .where(_c.id.in_(list(job_ids)))
                .values(availableAt=db_now(round(wait_s * 1000)))
            )

    async def release(self, warmed: Mapping[str, Group]) -> list[str]:
        if not warmed:
            return []
        # Only rows this transaction holds are marked (the locks stay in one order).
        await self._conn.execute(
            update(sql.jobs)
            .where(_c.id.in_(sorted(warmed)), _c.prefixWarmedAt.is_(None))
            .values(prefixWarmedAt=db_now())
        )
        groups = set(warmed.values())
        held = (
            _c.userId.in_(sorted({user for user, _ in groups})),
            _c.lifecycleStatus == LifecycleStatus.QUEUED.value,
            _of(groups),
            _c.availableAt > db_now(),
        )
        ids = list(
            (await self._conn.execute(select(_c.id).where(*held).with_for_update())).scalars()
        )
        if ids:
            await self._conn.execute(
                update(sql.jobs).where(_c.id.in_(ids), *held).values(availableAt=db_now())
            )
        return ids

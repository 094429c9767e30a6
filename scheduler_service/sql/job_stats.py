"""Operators' views and repairs: queue statistics and re-driving dead outbox events."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import cast

from sqlalchemy import Table, func, not_, select, update

from scheduler_service.core.commands import QueueStats
from scheduler_service.core.events import OutboxStatus
from scheduler_service.core.state_machine import TERMINAL, LifecycleStatus
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.models import AiJob, OutboxEvent
from scheduler_service.sql.job_statements import engine_owned, not_waiting_for_cheap_hours
from scheduler_service.sql.uow import SqlTransaction, SqlUnitOfWork

_jobs = cast(Table, AiJob.__table__)
_outbox = cast(Table, OutboxEvent.__table__)


def _age_s(now: datetime, then: datetime | None) -> float:
    return max(0.0, (now - then).total_seconds()) if then else 0.0


#: What the gauges count: the jobs and events still to be dealt with, read through the status
#: indexes, so that a refresh costs what the backlog holds and not what the history does.
_LIVE_JOBS = (LifecycleStatus.QUEUED.value, LifecycleStatus.RUNNING.value)
_LIVE_EVENTS = (OutboxStatus.PENDING.value, OutboxStatus.PROCESSING.value, OutboxStatus.DEAD.value)


async def queue_stats(uow: SqlUnitOfWork, defer_ms: int = 0) -> QueueStats:
    """Every status, finished jobs and published events included (GetQueueStats, on demand);
    ``defer_ms``: how long the current peak window lasts (0: off-peak)."""
    return await uow.read(lambda tx: _queue_stats(tx, live_only=False, defer_ms=defer_ms))


async def live_queue_stats(uow: SqlUnitOfWork, defer_ms: int = 0) -> QueueStats:
    """Jobs queued or running and events not yet published only (the gauges, refreshed on a
    period): ``depths`` holds no finished jobs; ``aijob_job_outcomes_total`` counts those."""
    return await uow.read(lambda tx: _queue_stats(tx, live_only=True, defer_ms=defer_ms))


#: Off-peak jobs that dispatch leaves queued now (the claim's clause, negated), per queue.
_DEFERRED = (
    select(_jobs.c.queueName, func.count())
    .where(
        _jobs.c.lifecycleStatus == LifecycleStatus.QUEUED.value,
        engine_owned(),
        not_(not_waiting_for_cheap_hours()),
    )
    .group_by(_jobs.c.queueName)
)


async def _deferred(tx: SqlTransaction, defer_ms: int) -> dict[str, int]:
    if defer_ms <= 0:
        return {}
    found = await tx.conn.execute(_DEFERRED, {"b_defer_ms": defer_ms})
    return {str(queue): int(count) for queue, count in found}


async def _queue_stats(tx: SqlTransaction, *, live_only: bool, defer_ms: int) -> QueueStats:
    j, o = _jobs.c, _outbox.c
    conn = tx.conn
    now = (await conn.execute(select(db_now()))).scalar_one()
    # The legacy system's rows are its own: not in the engine's gauges.
    depth_query = select(j.queueName, j.jobType, j.lifecycleStatus, func.count()).where(
        engine_owned()
    )
    event_query = select(o.status, func.count())
    if live_only:
        depth_query = depth_query.where(j.lifecycleStatus.in_(_LIVE_JOBS))
        event_query = event_query.where(o.status.in_(_LIVE_EVENTS))
    depths = [
        (str(q), str(t), str(s), int(n))
        for q, t, s, n in await conn.execute(
            depth_query.group_by(j.queueName, j.jobType, j.lifecycleStatus).order_by(
                j.queueName, j.jobType, j.lifecycleStatus
            )
        )
    ]
    oldest = {
        str(q): _age_s(now, created)
        for q, created in await conn.execute(
            select(j.queueName, func.min(j.createdAt))
            .where(j.lifecycleStatus == LifecycleStatus.QUEUED.value, engine_owned())
            .group_by(j.queueName)
        )
    }
    events: dict[str, int] = {
        str(status): int(n) for status, n in await conn.execute(event_query.group_by(o.status))
    }
    lag_from = (
        await conn.execute(
            select(func.min(o.createdAt)).where(o.status == OutboxStatus.PENDING.value)
        )
    ).scalar_one()
    running = sum(n for _, _, s, n in depths if s == LifecycleStatus.RUNNING.value)
    finished = [] if live_only else await _finished_last_hour(tx)
    return QueueStats(
        depths=depths,
        oldest_queued_s=oldest,
        running=running,
        dead_events=int(events.get(OutboxStatus.DEAD.value, 0)),
        pending_events=int(events.get(OutboxStatus.PENDING.value, 0)),
        outbox_lag_s=_age_s(now, lag_from),
        deferred=await _deferred(tx, defer_ms),
        finished_last_hour=finished,
    )


_FINISHED_LAST_HOUR = (
    select(_jobs.c.queueName, _jobs.c.jobType, _jobs.c.lifecycleStatus, func.count())
    .where(
        _jobs.c.lifecycleStatus.in_([s.value for s in TERMINAL]),
        _jobs.c.finishedAt >= db_now(-3_600_000),
        engine_owned(),
    )
    .group_by(_jobs.c.queueName, _jobs.c.jobType, _jobs.c.lifecycleStatus)
    .order_by(_jobs.c.queueName, _jobs.c.jobType, _jobs.c.lifecycleStatus)
)


async def _finished_last_hour(tx: SqlTransaction) -> list[tuple[str, str, str, int]]:
    return [
        (str(q), str(t), str(s), int(n))
        for q, t, s, n in await tx.conn.execute(_FINISHED_LAST_HOUR)
    ]


async def redrive_dead_events(uow: SqlUnitOfWork, event_ids: Sequence[int]) -> int:
    """Move dead events (all, or the given ids) back to pending with a fresh attempt budget."""
    statement = (
        update(_outbox)
        .where(_outbox.c.status == OutboxStatus.DEAD.value)
        .values(
            status=OutboxStatus.PENDING.value,
            attemptCount=0,
            availableAt=db_now(),
            lockedBy=None,
            lockedAt=None,
        )
    )
    if event_ids:
        statement = statement.where(_outbox.c.id.in_(list(event_ids)))

    async def redrive(tx: SqlTransaction) -> int:
        return int((await tx.conn.execute(statement)).rowcount)

    return await uow.run(redrive)

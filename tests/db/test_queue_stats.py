"""Queue statistics: GetQueueStats counts every status; the gauges count only what is still to be
dealt with, so that their refresh costs what the backlog holds and not what the history does."""

from __future__ import annotations

from typing import cast

from sqlalchemy import Table, update
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.core.events import EventType, OutboxStatus
from scheduler_service.core.records import JobError
from scheduler_service.ports import Transaction
from scheduler_service.sql.db.models import OutboxEvent
from scheduler_service.sql.job_stats import live_queue_stats, queue_stats
from scheduler_service.sql.uow import SqlUnitOfWork
from tests.support.db import create_job
from tests.support.store import StoreCalls

HASH = "b" * 64
QUEUE, TYPE = "ai-background", "synthetic_echo"
_outbox = cast(Table, OutboxEvent.__table__)


async def _one_job_in_each_state(repo: StoreCalls, engine: AsyncEngine) -> None:
    queued, running, done, failed = [
        await create_job(repo, engine, queue_name=QUEUE) for _ in range(4)
    ]
    for job_id in (running, done, failed):
        await repo.lock(job_id, "rt-1")
    await repo.mark_succeeded(done, 1, output_hash=HASH, result_idempotency_key=f"{done}:1:{HASH}")
    error = JobError("MODEL_TIMEOUT", "The model did not answer in time.", "read timeout")
    await repo.mark_failed(failed, 1, error, runtime_instance_id="rt-1")

    async def three_events(tx: Transaction) -> None:
        for job_id in (queued, running, done):
            await tx.emit(EventType.COMPLETED, job_id=job_id, job_type=TYPE)

    await repo.uow.run(three_events)
    async with engine.begin() as conn:
        first, second, _ = sorted(
            (await conn.execute(_outbox.select().with_only_columns(_outbox.c.id))).scalars()
        )
        await conn.execute(
            update(_outbox)
            .where(_outbox.c.id == first)
            .values(status=OutboxStatus.PUBLISHED.value, publishedSeq=1)
        )
        await conn.execute(
            update(_outbox).where(_outbox.c.id == second).values(status=OutboxStatus.DEAD.value)
        )


async def test_the_gauges_count_the_backlog_and_the_admin_view_everything(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    await _one_job_in_each_state(repo, engine)
    uow = SqlUnitOfWork(engine)

    everything = await queue_stats(uow)
    assert everything.depths == [
        (QUEUE, TYPE, status, 1) for status in ("failed", "queued", "running", "succeeded")
    ]
    live = await live_queue_stats(uow)
    assert live.depths == [(QUEUE, TYPE, status, 1) for status in ("queued", "running")]

    for stats in (everything, live):
        assert (stats.running, stats.pending_events, stats.dead_events) == (1, 1, 1)
        assert list(stats.oldest_queued_s) == [QUEUE]

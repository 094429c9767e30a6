"""The reaper on real MariaDB: cancels and exhausted attempts, replicas reaping at once, and the
heartbeat-versus-reaper race at the expiry instant (reliability S6, S7, S21)."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

import pytest
from sqlalchemy import update

from devtools.harness.runtime_client import JobClient
from scheduler_service.core.errors import LeaseLostError
from scheduler_service.core.records import JobError, LeasePayload
from scheduler_service.services.reports import HeartbeatReport
from scheduler_service.sql.db.clock import db_now
from tests.support.db_checks import JOBS, events, job_row
from tests.support.schedulers import RunningScheduler, SchedulerFactory
from tests.support.store import StoreCalls

pytestmark = pytest.mark.mysql

_ENDED = JobError("INTERNAL_ERROR", "Ended by the test.")


@pytest.fixture
async def scheduler(mysql_url: str, start_scheduler: SchedulerFactory) -> RunningScheduler:
    """A scheduler whose background reaper waits an hour: each test's ``reap_once()`` is the
    only reaper, so what it returns does not depend on which of two reapers saw an expiry
    first."""
    return await start_scheduler(mysql_url, reaper_interval_s=3600)


async def _expire(scheduler: RunningScheduler, job_id: str) -> None:
    """Move a lease's deadline into the past (test setup; lifecycleStatus is not touched)."""
    row = await job_row(scheduler.app.engine, job_id)
    async with scheduler.app.engine.begin() as conn:
        await conn.execute(
            update(JOBS)
            .where(JOBS.c.id == job_id)
            .values(lockUntil=row["lockUntil"] - timedelta(hours=1))
        )


async def _leased_job(scheduler: RunningScheduler, runtime_id: str = "rt-1") -> str:
    return (await _lease(scheduler, runtime_id)).job_id


async def _lease(scheduler: RunningScheduler, runtime_id: str = "rt-1") -> LeasePayload:
    job = await JobClient(scheduler.channel).create()
    return await scheduler.app.leasing.lock(job.job_id, runtime_id)


async def test_expired_lease_with_cancel_request_becomes_cancelled(
    scheduler: RunningScheduler,
) -> None:
    job_id = await _leased_job(scheduler)
    await JobClient(scheduler.channel).cancel(job_id)
    await _expire(scheduler, job_id)
    assert await scheduler.app.reaper.reap_once() == 1
    assert (await job_row(scheduler.app.engine, job_id))["lifecycleStatus"] == "cancelled"
    assert await events(scheduler.app.engine, job_id) == ["ai.job.enqueue", "ai.job.cancelled"]


async def test_expired_last_attempt_fails_instead_of_looping(scheduler: RunningScheduler) -> None:
    job_id = await _leased_job(scheduler)
    protocol, reaper = scheduler.app.runtime, scheduler.app.reaper
    for attempt in (1, 2, 3):
        await _expire(scheduler, job_id)
        assert await reaper.reap_once() == 1
        row = await job_row(scheduler.app.engine, job_id)
        if attempt < 3:
            assert (row["lifecycleStatus"], row["errorCode"]) == ("queued", "JOB_TIMEOUT")
            async with scheduler.app.engine.begin() as conn:  # skip the backoff
                await conn.execute(
                    update(JOBS).where(JOBS.c.id == job_id).values(availableAt=row["queuedAt"])
                )
            await protocol.leasing.lock(job_id, f"rt-{attempt + 1}")
    row = await job_row(scheduler.app.engine, job_id)
    assert (row["lifecycleStatus"], row["errorCode"]) == (
        "failed",
        "LEASE_EXPIRED_ATTEMPTS_EXHAUSTED",
    )
    assert (await events(scheduler.app.engine, job_id))[-1] == "ai.job.failed"


async def test_two_replicas_reaping_at_once_requeue_each_job_once(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    a = await start_scheduler(mysql_url, reaper_interval_s=3600)
    b = await start_scheduler(mysql_url, reaper_interval_s=3600)
    job_ids = [await _leased_job(a, f"rt-{i}") for i in range(40)]
    for job_id in job_ids:
        await _expire(a, job_id)
    reaped = await asyncio.gather(a.app.reaper.reap_once(), b.app.reaper.reap_once())
    assert sum(reaped) == 40
    for job_id in job_ids:
        row = await job_row(a.app.engine, job_id)
        assert (row["lifecycleStatus"], row["attemptCount"]) == ("queued", 1)


async def test_heartbeat_racing_the_reaper_never_both_win(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    """1,000 leases that end within a few milliseconds of the race: sometimes the heartbeat lands
    first and keeps the lease, sometimes the reaper takes it; never both (S6)."""
    scheduler = await start_scheduler(
        mysql_url, reaper_interval_s=3600, lease_grace_s=0, max_active_jobs_per_user=10_000
    )
    protocol, reaper = scheduler.app.runtime, scheduler.app.reaper
    rng = random.Random(6)
    outcomes = {"heartbeat": 0, "reaper": 0, "neither": 0}
    for _ in range(1000):
        lease = await _lease(scheduler)
        job_id = lease.job_id
        async with scheduler.app.engine.begin() as conn:
            offset = rng.randint(-15, 15)
            await conn.execute(
                update(JOBS).where(JOBS.c.id == job_id).values(lockUntil=db_now(offset))
            )
        beat, _reaped = await asyncio.gather(
            protocol.reports.heartbeat(HeartbeatReport(job_id, 1, "rt-1", 10, lease.lease_token)),
            reaper.reap_once(),
            return_exceptions=True,
        )
        # Judged on this job's row: the sweep may also take an older round's job.
        row = await job_row(scheduler.app.engine, job_id)
        beat_won = not isinstance(beat, BaseException)
        reaper_won = row["lifecycleStatus"] == "queued"
        assert not (beat_won and reaper_won), "a heartbeat and the reaper both won"
        if beat_won:
            assert row["lifecycleStatus"] == "running" and row["attemptCount"] == 1
            outcomes["heartbeat"] += 1
            # End it, so that no later sweep takes it once its lease or timeout runs out.
            await StoreCalls(scheduler.app.engine).mark_failed(
                job_id, 1, _ENDED, runtime_instance_id="rt-1"
            )
        elif reaper_won:
            assert isinstance(beat, LeaseLostError) and row["errorCode"] == "JOB_TIMEOUT"
            outcomes["reaper"] += 1
        else:
            # The heartbeat came after the deadline and the reaper looked just before it: the
            # lease stays running until the next sweep takes it.
            assert isinstance(beat, LeaseLostError) and row["lifecycleStatus"] == "running"
            await reaper.reap_once()
            assert (await job_row(scheduler.app.engine, job_id))["lifecycleStatus"] == "queued"
            outcomes["neither"] += 1
    assert outcomes["heartbeat"] > 0 and outcomes["reaper"] > 0, outcomes

"""A job created while a runtime on the same replica has a free slot is leased inside the
create's own transaction (no dispatch round in between), and the hand-off still serves the
queue in order: an older waiting job of the same type goes first."""

from __future__ import annotations

import pytest

from tests.protocol.db_checks import job_row
from tests.protocol.runtime_client import ClientRuntime, JobClient
from tests.schedulers import RunningScheduler
from tests.waiting import eventually

pytestmark = pytest.mark.mysql


async def _subscribed(scheduler: RunningScheduler, instance_id: str) -> None:
    async def attached() -> bool:
        return instance_id in scheduler.app.dispatcher.subscribed()

    await eventually(attached)


async def test_a_new_job_is_leased_within_its_create(scheduler: RunningScheduler) -> None:
    await scheduler.app.dispatcher.stop()  # no rounds: only the hand-off can lease
    runtime = ClientRuntime(scheduler.channel, "rt-idle", slots=1)
    await runtime.connect()
    try:
        jobs = JobClient(scheduler.channel)
        await _subscribed(scheduler, "rt-idle")
        created = await jobs.create()
        lease = await runtime.next_lease()
        assert (lease.job_id, lease.attempt_no) == (created.job_id, 1)
        row = await job_row(scheduler.app.engine, created.job_id)
        assert (row["lifecycleStatus"], row["lockedBy"]) == ("running", "rt-idle")
        # The slot is spent: the next job waits for a credit.
        second = await jobs.create()
        assert (await job_row(scheduler.app.engine, second.job_id))["lifecycleStatus"] == "queued"
    finally:
        await runtime.close()


async def test_the_hand_off_takes_the_oldest_waiting_job_first(
    scheduler: RunningScheduler,
) -> None:
    await scheduler.app.dispatcher.stop()
    jobs = JobClient(scheduler.channel)
    older = await jobs.create()
    runtime = ClientRuntime(scheduler.channel, "rt-fair", slots=1)
    await runtime.connect()
    try:
        await _subscribed(scheduler, "rt-fair")
        newer = await jobs.create()
        lease = await runtime.next_lease()
        assert lease.job_id == older.job_id
        assert (await job_row(scheduler.app.engine, newer.job_id))["lifecycleStatus"] == "queued"
    finally:
        await runtime.close()

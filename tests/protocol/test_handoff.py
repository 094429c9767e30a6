"""A job created while a runtime on the same replica has a free slot is leased inside the
create's own transaction (no dispatch round in between), and the hand-off still serves the
queue in order: an older waiting job of the same type goes first."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.protobuf import json_format
from sqlalchemy import func, select

from devtools.harness.runtime_client import ClientRuntime, JobClient
from devtools.harness.waiting import eventually
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from tests.support.db_checks import JOBS, job_row
from tests.support.schedulers import RunningScheduler

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


async def test_a_hand_off_cannot_spend_the_slots_a_round_is_claiming_for(
    scheduler: RunningScheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create hands off while a dispatch round is in the middle of its claim for the same
    stream: the runtime's two slots are never exceeded, because the round holds the slots it
    is claiming for."""
    dispatcher, leasing = scheduler.app.dispatcher, scheduler.app.leasing
    await dispatcher.stop()
    jobs = JobClient(scheduler.channel)
    waiting = [await jobs.create(), await jobs.create()]
    runtime = ClientRuntime(scheduler.channel, "rt-two", slots=2)
    await runtime.connect()
    try:
        await _subscribed(scheduler, "rt-two")
        claim, go_on = leasing.claim_within, asyncio.Event()

        async def paused_claim(*args: Any, **kwargs: Any) -> Any:
            if "demands" in kwargs:  # the round's own claim (by keyword), not a hand-off
                await go_on.wait()
            return await claim(*args, **kwargs)

        monkeypatch.setattr(leasing, "claim_within", paused_claim)
        round_in_progress = asyncio.ensure_future(dispatcher._dispatch_round())
        late = await jobs.create()  # hands off, if it finds a free slot
        go_on.set()
        await round_in_progress
        leased = select(func.count()).where(
            JOBS.c.lockedBy == "rt-two", JOBS.c.lifecycleStatus == "running"
        )
        async with scheduler.app.engine.connect() as conn:
            assert (await conn.execute(leased)).scalar_one() == 2
        assert {(await runtime.next_lease()).job_id for _ in range(2)} == {
            job.job_id for job in waiting
        }
        assert (await job_row(scheduler.app.engine, late.job_id))["lifecycleStatus"] == "queued"
    finally:
        await runtime.close()


async def test_a_bulk_create_hands_off_as_many_jobs_as_local_slots_are_free(
    scheduler: RunningScheduler,
) -> None:
    """The hand-off leases a whole gathering's worth, dealt over the streams with free slots,
    not one job per type."""
    await scheduler.app.dispatcher.stop()  # no rounds: only the hand-off can lease
    runtimes = [
        ClientRuntime(scheduler.channel, "rt-bulk-a", slots=2, batch_frames=True),
        ClientRuntime(scheduler.channel, "rt-bulk-b", slots=3),
    ]
    for runtime in runtimes:
        await runtime.connect()
    try:
        for runtime in runtimes:
            await _subscribed(scheduler, runtime.instance_id)
        jobs = JobClient(scheduler.channel)
        items = []
        for index in range(6):
            job = job_pb.CreateJobRequest(job_type="synthetic_echo")
            json_format.ParseDict({"n": index}, job.snapshot)
            items.append(job_pb.CreateJobsItem(job=job))
        reply = await jobs.stub.CreateJobs(
            job_pb.CreateJobsRequest(items=items), metadata=jobs.metadata, timeout=30
        )
        created = [result.job.job_id for result in reply.results]

        leased = {(await runtimes[0].next_lease()).job_id for _ in range(2)}
        leased |= {(await runtimes[1].next_lease()).job_id for _ in range(3)}

        assert len(leased) == 5 and leased <= set(created)
        (left,) = set(created) - leased
        assert (await job_row(scheduler.app.engine, left))["lifecycleStatus"] == "queued"
    finally:
        for runtime in runtimes:
            await runtime.close()

"""SubscribeEvents: a subscriber that disconnects and resumes from its last event id misses no
event, while 2,000 jobs are created concurrently and other transactions commit out of id order."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output
from scheduler_service.sql.outbox_writer import EventType, add_event
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import job_service_pb2_grpc
from shared.status_details import error_reason
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql

JOBS = 2_000
HELD_PAIRS = 100


async def _out_of_order_pairs(scheduler: RunningScheduler) -> list[str]:
    """Transactions that take an outbox id first but commit after a later one (S13)."""
    engine, written = scheduler.app.engine, []
    for pair in range(HELD_PAIRS):
        first_inserted, second_committed = asyncio.Event(), asyncio.Event()

        async def early(
            pair: int = pair,
            first_inserted: asyncio.Event = first_inserted,
            second_committed: asyncio.Event = second_committed,
        ) -> None:
            async with engine.begin() as conn:
                await add_event(
                    conn, EventType.ENQUEUE, job_id=f"late-{pair}", job_type="synthetic_echo"
                )
                first_inserted.set()
                await second_committed.wait()  # holds its lower id until the higher one commits

        async def later(
            pair: int = pair,
            first_inserted: asyncio.Event = first_inserted,
            second_committed: asyncio.Event = second_committed,
        ) -> None:
            await first_inserted.wait()
            async with engine.begin() as conn:
                await add_event(
                    conn, EventType.ENQUEUE, job_id=f"early-{pair}", job_type="synthetic_echo"
                )
            second_committed.set()
            scheduler.app.outbox.notify()

        await asyncio.gather(early(), later())
        written += [f"late-{pair}", f"early-{pair}"]
    return written


async def _subscribe(
    stub: Any, after: str, want: set[str], seen: dict[str, int], stop_after: int | None
) -> str:
    """Read events into ``seen`` (job id -> position) until ``want`` is covered or
    ``stop_after`` events arrived; returns the last event id, for resuming."""
    call = stub.SubscribeEvents(
        job_pb.SubscribeEventsRequest(event_types=["ai.job.enqueue"], after_event_id=after)
    )
    last, count = after, 0
    try:
        async for event in call:
            assert int(event.event_id) > int(last or 0), "positions must only go up"
            seen.setdefault(event.job_id, int(event.event_id))
            last, count = event.event_id, count + 1
            if want <= seen.keys() or (stop_after is not None and count >= stop_after):
                break
    finally:
        call.cancel()
    return last


async def test_resuming_subscriber_misses_nothing(scheduler: RunningScheduler) -> None:
    stub = job_service_pb2_grpc.JobServiceStub(scheduler.channel)
    users = [JobClient(scheduler.channel, f"user-{u}") for u in range(40)]  # under the active cap
    semaphore = asyncio.Semaphore(40)

    async def create(index: int) -> str:
        async with semaphore:
            return (await users[index % 40].create(snapshot={"i": index})).job_id

    producers = asyncio.gather(
        asyncio.gather(*(create(i) for i in range(JOBS))), _out_of_order_pairs(scheduler)
    )
    seen: dict[str, int] = {}
    want: set[str] = set()
    # Subscribe from the beginning, drop the stream every 300 events, resume from the last id.
    last = await _subscribe(stub, "0", want, seen, stop_after=300)
    created, held = await producers
    want = set(created) | set(held)
    assert len(want) == JOBS + 2 * HELD_PAIRS
    resumes = 1
    while not want <= seen.keys():
        last = await asyncio.wait_for(
            _subscribe(stub, last, want, seen, stop_after=300), timeout=60
        )
        resumes += 1
    assert resumes > 3
    assert set(seen) == want
    positions = sorted(seen.values())
    assert positions == list(range(1, len(want) + 1)), "the log has no gaps and no repeats"


async def test_default_types_and_bad_requests(scheduler: RunningScheduler) -> None:
    stub = job_service_pb2_grpc.JobServiceStub(scheduler.channel)
    for request in (
        job_pb.SubscribeEventsRequest(event_types=["ai.job.exploded"]),
        job_pb.SubscribeEventsRequest(after_event_id="not-a-number"),
    ):
        call = stub.SubscribeEvents(request)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in call:
                pass
        assert (caught.value.code(), error_reason(caught.value)) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_ARGUMENT",
        )
    # From "now" with the default types: completed, failed and cancelled — not enqueue.
    call = stub.SubscribeEvents(job_pb.SubscribeEventsRequest())
    events = call.__aiter__()
    jobs = JobClient(scheduler.channel)
    runtime = ClientRuntime(scheduler.channel, "rt-ev", slots=1)
    await runtime.connect()
    try:
        done = await jobs.create()
        lease = await runtime.next_lease()
        await runtime.submit(lease, echo_output(lease))
        cancelled = await jobs.create(
            job_type="weak_point_analysis", snapshot={"learner": {"id": "l"}}
        )
        await jobs.cancel(cancelled.job_id)
        first = await asyncio.wait_for(events.__anext__(), timeout=30)
        second = await asyncio.wait_for(events.__anext__(), timeout=30)
    finally:
        call.cancel()
        await runtime.close()
    assert (first.event_type, first.job_id, first.job_type) == (
        "ai.job.completed",
        done.job_id,
        "synthetic_echo",
    )
    assert (second.event_type, second.job_id) == ("ai.job.cancelled", cancelled.job_id)
    assert first.HasField("occurred_at")


async def test_an_event_names_the_user_whose_job_a_consumer_may_then_read(
    scheduler: RunningScheduler,
) -> None:
    stub = job_service_pb2_grpc.JobServiceStub(scheduler.channel)
    created = await JobClient(scheduler.channel, "learner-e").create()
    call = stub.SubscribeEvents(
        job_pb.SubscribeEventsRequest(event_types=["ai.job.enqueue"], after_event_id="0")
    )
    try:
        event = await asyncio.wait_for(anext(aiter(call)), 30)
    finally:
        call.cancel()
    assert (event.job_id, event.user_id) == (created.job_id, "learner-e")
    # The consumer acts for that user, as any service call does; another user still sees nothing.
    job = await JobClient(scheduler.channel, event.user_id).get(event.job_id)
    assert job.job_id == created.job_id
    with pytest.raises(grpc.aio.AioRpcError) as hidden:
        await JobClient(scheduler.channel, "someone-else").get(event.job_id)
    assert hidden.value.code() is grpc.StatusCode.NOT_FOUND

"""Resource limits on the Poll surface (reliability S25): more streams than a replica holds are
refused with RESOURCE_EXHAUSTED while every other RPC is still served, a freed place is taken
again, and a stream that never subscribes is closed and gives its place back."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import grpc
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import update

from devtools.harness import tokens
from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output
from scheduler_service.sql.db.clock import db_now
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.status_details import error_reason
from tests.support.db_checks import JOBS, count
from tests.support.schedulers import SchedulerFactory

pytestmark = pytest.mark.mysql

LIMIT = 3


def _poll_count(code: str) -> float:
    return REGISTRY.get_sample_value("aijob_rpc_total", {"method": "Poll", "code": code}) or 0.0


async def _refusal(runtime: ClientRuntime) -> grpc.aio.AioRpcError:
    """Connect and wait for the stream's end: it must be refused."""
    await runtime.connect()
    assert runtime._reader is not None
    try:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await asyncio.wait_for(runtime._reader, timeout=10)
    finally:
        await runtime.close()
    return refused.value


async def _accepted(runtime: ClientRuntime, jobs: JobClient) -> None:
    """Connected and subscribed: given a job to run, it gets a lease."""
    await runtime.connect()
    await jobs.create()
    await runtime.next_lease()


async def test_streams_over_the_limit_are_refused_and_others_served(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, max_poll_streams=LIMIT)
    jobs = JobClient(scheduler.channel)
    held = [ClientRuntime(scheduler.channel, f"rt-{i}", slots=1) for i in range(LIMIT)]
    extra = ClientRuntime(scheduler.channel, "rt-extra", slots=1)
    try:
        for runtime in held:
            await _accepted(runtime, jobs)
        refusals_before = _poll_count("RESOURCE_EXHAUSTED")
        refused = await _refusal(extra)
        assert refused.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error_reason(refused) == "TOO_MANY_STREAMS"
        # Poll is counted like every other RPC, by the one status interceptor.
        assert _poll_count("RESOURCE_EXHAUSTED") == refusals_before + 1
        # Every other RPC is served meanwhile.
        await jobs.create()
        admin = admin_service_pb2_grpc.AdminServiceStub(scheduler.channel)
        stats = await admin.GetQueueStats(
            admin_pb.GetQueueStatsRequest(), metadata=tokens.bearer(tokens.ADMIN_TOKEN)
        )
        assert stats.running_count == LIMIT
        # A freed place is taken again.
        await held.pop().close()
        await extra.close()
        again = ClientRuntime(scheduler.channel, "rt-again", slots=1)
        held.append(again)
        await _accepted(again, jobs)
    finally:
        for runtime in [*held, extra]:
            await runtime.close()


async def _nothing(until: asyncio.Event) -> AsyncIterator[rt.PollRequest]:
    """A request stream that stays open, sending no message, until ``until`` is set."""
    await until.wait()
    return
    yield rt.PollRequest()  # never reached: it makes this a generator


async def test_a_stream_that_never_subscribes_is_closed(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, max_poll_streams=1, poll_subscribe_timeout_s=0.3)
    stub = ClientRuntime(scheduler.channel, "rt-silent").stub
    end_of_silence = asyncio.Event()
    silent = stub.Poll(_nothing(end_of_silence), metadata=tokens.bearer(tokens.RUNTIME_TOKEN))
    with pytest.raises(grpc.aio.AioRpcError) as closed:
        await asyncio.wait_for(silent.read(), timeout=10)
    end_of_silence.set()  # the call is over: its request pump may finish
    assert closed.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    # Its place is free again: a real runtime subscribes.
    runtime = ClientRuntime(scheduler.channel, "rt-next", slots=1)
    try:
        await _accepted(runtime, JobClient(scheduler.channel))
    finally:
        await runtime.close()


async def test_one_runtime_token_holds_at_most_its_share_of_streams(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(
        mysql_url,
        max_streams_per_token=2,
        runtime_tokens=f"{tokens.RUNTIME_TOKEN},another-runtime-token",
    )
    jobs = JobClient(scheduler.channel)
    mine = [ClientRuntime(scheduler.channel, f"rt-mine-{i}", slots=1) for i in range(2)]
    theirs = ClientRuntime(scheduler.channel, "rt-theirs", slots=1, token="another-runtime-token")
    try:
        for runtime in mine:
            await _accepted(runtime, jobs)
        refused = await _refusal(ClientRuntime(scheduler.channel, "rt-mine-3", slots=1))
        assert (refused.code(), error_reason(refused)) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "TOO_MANY_STREAMS",
        )
        await _accepted(theirs, jobs)  # another token's streams are counted apart
    finally:
        for runtime in (*mine, theirs):
            await runtime.close()


async def test_slots_above_the_cap_are_refused(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, max_slots_per_stream=8)
    refused = await _refusal(ClientRuntime(scheduler.channel, "rt-greedy", slots=9))
    assert refused.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "slots must be 1-8" in (refused.details() or "")


async def test_a_stream_whose_leases_expire_unreported_loses_its_slots(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    """A hoarder takes leases and never reports them: each lease the reaper takes back costs it a
    slot (never below one), so it cannot burn other users' attempts at its full width; each
    result it does report earns one back."""
    scheduler = await start_scheduler(mysql_url, reaper_interval_s=3600)
    app = scheduler.app
    jobs = JobClient(scheduler.channel)
    for _ in range(8):
        await jobs.create()
    hoarder = ClientRuntime(scheduler.channel, "rt-hoarder", slots=4)
    await hoarder.connect()
    try:
        taken = [await hoarder.next_lease() for _ in range(4)]
        (session,) = app.dispatcher.sessions()
        async with app.engine.begin() as conn:
            await conn.execute(
                update(JOBS)
                .where(JOBS.c.lockedBy == "rt-hoarder")
                .values(lockUntil=db_now(-3_600_000), startedAt=db_now(-3_600_000))
            )
        assert await app.reaper.reap_once() == len(taken)
        assert (session.slots, session.credits) == (1, 0)
        hoarder.credit(4)  # asks for four; one slot is all it has now
        lease = await hoarder.next_lease()
        held = await count(app.engine, JOBS, lockedBy="rt-hoarder", lifecycleStatus="running")
        assert (held, session.slots, session.credits) == (1, 1, 0)
        ack = await hoarder.submit_on_stream(lease, echo_output(lease))
        assert ack.status.code == 0 and session.slots == 2  # a report earns a slot back
    finally:
        await hoarder.close()


async def test_shutting_down_ends_idle_streams_at_once_and_refuses_new_ones(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    """An idle Poll stream no longer holds a replica's stop for its whole grace period: the
    stream ends UNAVAILABLE (the runtime reconnects elsewhere) and a new one is refused."""
    scheduler = await start_scheduler(mysql_url)
    jobs = JobClient(scheduler.channel)
    busy = ClientRuntime(scheduler.channel, "rt-busy", slots=1)
    idle = ClientRuntime(scheduler.channel, "rt-idle", slots=1, job_types=["quiz_generation"])
    try:
        await _accepted(busy, jobs)
        await idle.connect()
        # An ack proves the stream subscribed: the stream reads its messages in order.
        probe = rt.HeartbeatRequest(job_id="01a2-none", attempt_no=1, runtime_instance_id="rt-idle")
        assert (await idle.report(rt.PollReport(heartbeat=probe))).status.code != 0
        assert len(scheduler.app.dispatcher.sessions()) == 2
        scheduler.app.polls.shut_down()
        for runtime in (busy, idle):
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                await runtime.stream_end()
            assert (ended.value.code(), error_reason(ended.value)) == (
                grpc.StatusCode.UNAVAILABLE,
                "PLATFORM_UNAVAILABLE",
            )
        late = await _refusal(ClientRuntime(scheduler.channel, "rt-late", slots=1))
        assert late.code() is grpc.StatusCode.UNAVAILABLE
        assert scheduler.app.dispatcher.sessions() == []
    finally:
        await busy.close()
        await idle.close()


async def test_subscribe_churn_writes_no_info_lines(
    mysql_url: str, start_scheduler: SchedulerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Runtimes that connect and go in a loop cost the log nothing at INFO."""
    scheduler = await start_scheduler(mysql_url)
    jobs = JobClient(scheduler.channel)
    caplog.set_level(logging.INFO, logger="scheduler_service")
    for i in range(5):
        runtime = ClientRuntime(scheduler.channel, f"rt-churn-{i}", slots=1)
        try:
            await _accepted(runtime, jobs)
        finally:
            await runtime.close()
    churn_actions = ("poll_subscribe", "poll_end")
    churn = [r for r in caplog.records if getattr(r, "action", "") in churn_actions]
    assert churn == []

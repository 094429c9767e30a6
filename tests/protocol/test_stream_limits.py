"""Resource limits on the Poll surface (reliability S25): more streams than a replica holds are
refused with RESOURCE_EXHAUSTED while every other RPC is still served, a freed place is taken
again, and a stream that never subscribes is closed and gives its place back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest
from prometheus_client import REGISTRY

from aijob.harness import tokens
from aijob.harness.runtime_client import ClientRuntime, JobClient
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.status_details import error_reason
from tests.support.schedulers import SchedulerFactory

pytestmark = pytest.mark.mysql

LIMIT = 3


def _poll_count(code: str) -> float:
    return REGISTRY.get_sample_value("aijob_rpc_total", {"method": "Poll", "code": code}) or 0.0


async def _refusal(runtime: ClientRuntime) -> grpc.aio.AioRpcError:
    """Connect and wait for the stream's end: it must be refused."""
    await runtime.connect()
    assert runtime._reader is not None
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await asyncio.wait_for(runtime._reader, timeout=10)
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


async def _nothing() -> AsyncIterator[rt.PollRequest]:
    """A request stream that stays open and never sends a message."""
    await asyncio.Event().wait()
    yield rt.PollRequest()  # never reached


async def test_a_stream_that_never_subscribes_is_closed(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, max_poll_streams=1, poll_subscribe_timeout_s=0.3)
    stub = ClientRuntime(scheduler.channel, "rt-silent").stub
    silent = stub.Poll(_nothing(), metadata=tokens.bearer(tokens.RUNTIME_TOKEN))
    with pytest.raises(grpc.aio.AioRpcError) as closed:
        await asyncio.wait_for(silent.read(), timeout=10)
    assert closed.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    # Its place is free again: a real runtime subscribes.
    runtime = ClientRuntime(scheduler.channel, "rt-next", slots=1)
    try:
        await _accepted(runtime, JobClient(scheduler.channel))
    finally:
        await runtime.close()

"""Anonymous streams cannot starve authenticated callers.

Two thousand Health/Watch streams (no token) are opened and held while a runtime takes, beats and
submits a job and a service creates and reads jobs. The anonymous pool admits its limit and
refuses the rest at once; no authenticated call is refused. The authenticated limit here (1,000)
is below the number of anonymous streams, so under one shared limit the runtime would starve."""

from __future__ import annotations

import asyncio
import contextlib

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devtools.harness.runtime_client import WAIT_S, ClientRuntime, JobClient, echo_output
from tests.support.schedulers import SchedulerFactory

pytestmark = pytest.mark.mysql

ANONYMOUS_STREAMS = 2_000
ANONYMOUS_LIMIT = 100
#: HTTP/2 allows each connection 1,000 concurrent streams by default: several connections.
CONNECTIONS = 4


async def _hold_watch(stub: health_pb2_grpc.HealthStub, admitted: asyncio.Queue[object]) -> str:
    """Open a Watch stream; an admitted one reports itself and stays open until cancelled."""
    call = stub.Watch(health_pb2.HealthCheckRequest(service=""))
    try:
        async for _ in call:
            admitted.put_nowait(call)
            await asyncio.Event().wait()  # held open
    except grpc.aio.AioRpcError as error:
        return error.code().name
    return "ENDED"


async def test_anonymous_streams_leave_authenticated_callers_their_capacity(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(
        mysql_url, max_concurrent_rpcs=1_000, max_anonymous_rpcs=ANONYMOUS_LIMIT
    )
    channels = [grpc.aio.insecure_channel(scheduler.address) for _ in range(CONNECTIONS)]
    stubs = [health_pb2_grpc.HealthStub(c) for c in channels]
    admitted: asyncio.Queue[object] = asyncio.Queue()
    watchers = [
        asyncio.ensure_future(_hold_watch(stubs[i % CONNECTIONS], admitted))
        for i in range(ANONYMOUS_STREAMS)
    ]
    runtime = ClientRuntime(scheduler.channel, "rt-busy", slots=2)
    try:
        # The pool's worth is admitted and held open; every other stream is refused at once.
        for _ in range(ANONYMOUS_LIMIT):
            await asyncio.wait_for(admitted.get(), WAIT_S)
        finished = asyncio.as_completed(watchers)
        refusals = [await next(finished) for _ in range(ANONYMOUS_STREAMS - ANONYMOUS_LIMIT)]
        # Our pool answers RESOURCE_EXHAUSTED; under the burst HTTP/2 may also refuse a stream
        # before it starts (RST_STREAM REFUSED_STREAM, seen as UNAVAILABLE). Either is a refusal.
        assert set(refusals) <= {"RESOURCE_EXHAUSTED", "UNAVAILABLE"}
        assert "RESOURCE_EXHAUSTED" in refusals
        assert admitted.empty() and sum(not w.done() for w in watchers) == ANONYMOUS_LIMIT

        # While the anonymous pool is full, every authenticated call goes through.
        jobs = JobClient(scheduler.channel)
        await runtime.connect()
        created = [await jobs.create() for _ in range(3)]
        for _ in created:
            lease = await runtime.next_lease()
            assert (await runtime.heartbeat(lease)).cancel_requested is False
            assert (await runtime.submit(lease, echo_output(lease))).duplicate is False
            runtime.credit(1)
        for job in created:
            assert (await jobs.get(job.job_id)).lifecycle_status == "succeeded"
    finally:
        await runtime.close()
        for watcher in watchers:
            watcher.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*watchers, return_exceptions=True)
        for channel in channels:
            await channel.close(grace=None)

"""Keepalive that fits the clients: an idle SubscribeEvents stream from a client that
pings every 5 s survives two minutes, then still delivers; a client pinging every second is
refused as a flood."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from devtools.harness import tokens
from devtools.harness.runtime_client import JobClient
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import job_service_pb2_grpc
from tests.support.schedulers import RunningScheduler

pytestmark = [pytest.mark.mysql, pytest.mark.slow]


def _pinging(address: str, every_ms: int) -> grpc.aio.Channel:
    return tokens.channel(
        address,
        options=[
            ("grpc.keepalive_time_ms", every_ms),
            ("grpc.keepalive_timeout_ms", 10_000),
            ("grpc.keepalive_permit_without_calls", 1),
            # The Python client stops pinging after two pings without data unless told not to.
            ("grpc.http2.max_pings_without_data", 0),
        ],
    )


async def test_an_idle_stream_with_5_s_pings_survives_two_minutes(
    scheduler: RunningScheduler,
) -> None:
    channel = _pinging(scheduler.address, 5_000)
    stub = job_service_pb2_grpc.JobServiceStub(channel)
    call = stub.SubscribeEvents(
        job_pb.SubscribeEventsRequest(event_types=["ai.job.enqueue"]),
        metadata=tokens.bearer(tokens.SERVICE_TOKEN),
    )
    events = aiter(call)
    try:
        nothing = asyncio.ensure_future(anext(events))
        done, _ = await asyncio.wait({nothing}, timeout=120)  # two idle minutes, pinging
        assert not done, nothing.result() if not nothing.cancelled() else "cancelled"
        created = await JobClient(scheduler.channel, "late").create()
        event = await asyncio.wait_for(nothing, 30)
        assert event.job_id == created.job_id  # the stream is still alive and delivers
    finally:
        call.cancel()
        await channel.close(None)


async def test_a_ping_flood_is_refused(scheduler: RunningScheduler) -> None:
    channel = _pinging(scheduler.address, 500)
    stub = job_service_pb2_grpc.JobServiceStub(channel)
    call = stub.SubscribeEvents(
        job_pb.SubscribeEventsRequest(event_types=["ai.job.enqueue"]),
        metadata=tokens.bearer(tokens.SERVICE_TOKEN),
    )
    try:
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await asyncio.wait_for(anext(aiter(call)), 60)
        assert ended.value.code() in {
            grpc.StatusCode.UNAVAILABLE,
            grpc.StatusCode.RESOURCE_EXHAUSTED,
        }
    finally:
        call.cancel()
        await channel.close(None)

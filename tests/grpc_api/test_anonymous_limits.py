"""What a caller without a token can cost: anonymous 4 MiB messages were
parsed before any check, and 50 anonymous reflection streams pipelining requests drew 5 GB of
answers in 15 s. Now an anonymous request over 16 KiB is refused before it is parsed, and
reflection requests are rate-limited for the whole server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from devtools.harness import tokens
from scheduler_service.api.reflection import TokenBucket
from scheduler_service.api.server import build_server
from scheduler_service.api.status import ANONYMOUS_MAX_MESSAGE_BYTES
from scheduler_service.sql.migrate import migrate
from scheduler_service.wiring.app import SchedulerApp
from scheduler_service.wiring.settings import SchedulerSettings
from shared.status_details import error_reason

BURST = 10


@pytest.fixture
async def channel(tmp_path: Path) -> AsyncIterator[grpc.aio.Channel]:
    database_url = f"sqlite+aiosqlite:///{tmp_path}/a.db"
    # Migrated: the health watcher turns a database without tables NOT_SERVING, which raced the
    # SERVING this fixture sets.
    await migrate(database_url)
    settings = SchedulerSettings(
        listen="127.0.0.1:0",
        database_url=database_url,
        # Practically no refill: the burst is all a run of this test can use.
        reflection_rate_per_s=0.001,
        reflection_burst=BURST,
        **tokens.SETTINGS,
    )
    app = SchedulerApp.create(settings)
    await app.start()
    server, health_servicer, port = build_server(settings, app)
    await server.start()
    await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as chan:
        yield chan
    await server.stop(None)
    await app.stop()


async def test_an_oversized_anonymous_request_is_refused_unparsed(
    channel: grpc.aio.Channel,
) -> None:
    stub = health_pb2_grpc.HealthStub(channel)
    big = health_pb2.HealthCheckRequest(service="x" * (ANONYMOUS_MAX_MESSAGE_BYTES + 1))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Check(big, timeout=10)
    assert (caught.value.code(), error_reason(caught.value)) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_ARGUMENT",
    )
    reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_reflection_requests_past_the_burst_end_the_stream(
    channel: grpc.aio.Channel,
) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    call = stub.ServerReflectionInfo()
    answered = 0
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        for _ in range(BURST * 3):
            await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
            await call.read()
            answered += 1
        await call.done_writing()
        await call
    assert answered == BURST
    assert (caught.value.code(), error_reason(caught.value)) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "QUOTA_EXCEEDED",
    )


def test_the_bucket_refills_at_its_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(rate_per_s=2, burst=3, clock=lambda: now[0])
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    now[0] += 1.0  # two requests' worth
    assert [bucket.take() for _ in range(3)] == [True, True, False]

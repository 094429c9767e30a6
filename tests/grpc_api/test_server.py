"""The grpc.aio server in process: reflection, health, and the RPCs not built yet."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from devtools.harness import tokens
from scheduler_service.api.server import SERVICE_NAMES, build_server
from scheduler_service.wiring.app import SchedulerApp
from scheduler_service.wiring.settings import SchedulerSettings


@pytest.fixture
async def channel(tmp_path: Path) -> AsyncIterator[grpc.aio.Channel]:
    settings = SchedulerSettings(
        listen="127.0.0.1:0", database_url=f"sqlite+aiosqlite:///{tmp_path}/a.db", **tokens.SETTINGS
    )
    app = SchedulerApp.create(settings)
    server, health_servicer, port = build_server(settings, app)
    await server.start()
    await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    async with tokens.channel(f"127.0.0.1:{port}") as chan:
        yield chan
    await server.stop(None)
    await app.stop()


async def test_reflection_lists_every_service(channel: grpc.aio.Channel) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    call = stub.ServerReflectionInfo()
    await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
    response = await call.read()
    await call.done_writing()
    names = {s.name for s in response.list_services_response.service}
    assert set(SERVICE_NAMES) <= names
    assert "grpc.health.v1.Health" in names
    assert SERVICE_NAMES == (
        "aijob.v1.JobService",
        "aijob.v1.AdminService",
        "aijob.v1.RuntimeService",
    )


async def test_health_answers_serving(channel: grpc.aio.Channel) -> None:
    stub = health_pb2_grpc.HealthStub(channel)
    reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING

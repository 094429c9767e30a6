"""The scheduler's health follows its database: NOT_SERVING while MariaDB is unreachable,
SERVING again once it is back (the connection runs through a proxy the test cuts)."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sqlalchemy.engine import make_url

from devtools.harness.waiting import eventually
from tests.support.schedulers import SchedulerFactory
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.mysql


async def test_health_turns_not_serving_and_back(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    url = make_url(mysql_url)
    proxy = TcpProxy(url.host or "127.0.0.1", url.port or 3306)
    await proxy.start()
    proxied = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    scheduler = await start_scheduler(proxied, health_interval_s=0.1)
    health = health_pb2_grpc.HealthStub(grpc.aio.insecure_channel(scheduler.address))

    def status_is(expected: int) -> object:
        async def check() -> bool:
            reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=5)
            return bool(reply.status == expected)

        return check

    serving, not_serving = (
        health_pb2.HealthCheckResponse.SERVING,
        health_pb2.HealthCheckResponse.NOT_SERVING,
    )
    await eventually(status_is(serving), within_s=10)  # type: ignore[arg-type]
    await proxy.cut()
    await eventually(status_is(not_serving), within_s=30)  # type: ignore[arg-type]
    await proxy.start()
    await eventually(status_is(serving), within_s=30)  # type: ignore[arg-type]

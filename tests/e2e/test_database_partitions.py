"""Three kinds of database outage: refused (the proxy stops listening and
drops its connections), silent (packets dropped, connections left open: before, the outbox, the
reaper and the health loop hung for good) and missing schema (the tables renamed away). During
each, database-backed RPCs answer UNAVAILABLE (never DEADLINE_EXCEEDED) and health NOT_SERVING;
after it, every loop is back (an event published, a lease reaped, a job leased, health SERVING)
and no loop logged more than one line per ten seconds of the fault."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import REGISTRY
from sqlalchemy import text
from sqlalchemy.engine import make_url

from devtools.harness.runtime_client import ClientRuntime, JobClient
from devtools.harness.waiting import eventually
from scheduler_service.services.loops import LOG_EVERY_S
from scheduler_service.sql.db.engine import create_engine
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.status_details import error_reason
from tests.support.db_checks import events, job_row
from tests.support.schedulers import RunningScheduler, SchedulerFactory
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.mysql

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
TABLES = ("AiAnalysisJob", "OutboxEvent")


class Outage:
    """One kind of fault between a scheduler and its database, started and healed."""

    def __init__(self, kind: str, proxy: TcpProxy, direct_url: str) -> None:
        self.kind = kind
        self._proxy = proxy
        self._direct_url = direct_url

    async def begin(self) -> None:
        if self.kind == "refused":
            await self._proxy.cut()
        elif self.kind == "silent":
            self._proxy.silence()
        else:
            await self._rename(TABLES, [f"{t}_away" for t in TABLES])

    async def heal(self) -> None:
        if self.kind == "refused":
            await self._proxy.start()
        elif self.kind == "silent":
            self._proxy.resume()
        else:
            await self._rename([f"{t}_away" for t in TABLES], TABLES)

    async def _rename(self, old: Any, new: Any) -> None:
        engine = create_engine(self._direct_url, pool_size=1)
        try:
            async with engine.begin() as conn:
                pairs = ", ".join(f"{a} TO {b}" for a, b in zip(old, new, strict=True))
                await conn.execute(text(f"RENAME TABLE {pairs}"))
        finally:
            await engine.dispose()


@pytest.fixture
async def proxy(mysql_url: str) -> AsyncIterator[TcpProxy]:
    url = make_url(mysql_url)
    proxy = TcpProxy(url.host or "127.0.0.1", url.port or 3306)
    await proxy.start()
    yield proxy
    proxy.resume()
    await proxy.cut()


def _poll_answers(code: str) -> float:
    """How many Poll streams the scheduler in this process has ended with ``code``."""
    return REGISTRY.get_sample_value("aijob_rpc_total", {"method": "Poll", "code": code}) or 0.0


def _write_lost_to_status(error: grpc.aio.AioRpcError) -> bool:
    """grpc.aio's report of a client write that lost the race with the server's status."""
    return (
        error.code() == grpc.StatusCode.INTERNAL
        and error.details() == "Internal error from Core"
        and "SendMessageOperation" in (error.debug_error_string() or "")
    )


def _health_is(scheduler: RunningScheduler, expected: int) -> Callable[[], Awaitable[bool]]:
    stub = health_pb2_grpc.HealthStub(scheduler.channel)

    async def check() -> bool:
        reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
        return bool(reply.status == expected)

    return check


async def _unavailable(call: Awaitable[Any]) -> None:
    # The deadline is far beyond the health check's: only a hang could reach it.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    assert (caught.value.code(), error_reason(caught.value)) == (
        grpc.StatusCode.UNAVAILABLE,
        "PLATFORM_UNAVAILABLE",
    ), caught.value


@pytest.mark.parametrize("kind", ["refused", "silent", "missing_schema"])
async def test_every_loop_resumes_after_each_kind_of_outage(
    kind: str,
    mysql_url: str,
    proxy: TcpProxy,
    start_scheduler: SchedulerFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    proxied = make_url(mysql_url).set(host="127.0.0.1", port=proxy.port)
    scheduler = await start_scheduler(
        proxied.render_as_string(hide_password=False),
        # Generous for a loaded host: nothing here depends on how soon a fault is seen.
        health_interval_s=0.2,
        health_timeout_s=3.0,
        db_read_timeout_s=5.0,
        db_connect_timeout_s=3.0,
        lease_ttl_s=1,
        lease_grace_s=0,
        reaper_interval_s=0.3,
    )
    outage = Outage(kind, proxy, mysql_url)
    jobs = JobClient(scheduler.channel, "user-part")
    await eventually(_health_is(scheduler, SERVING))
    # A lease whose runtime goes away: only the reaper can take it back, after the outage.
    stranded = (await jobs.create()).job_id
    runtime = ClientRuntime(scheduler.channel, "rt-gone", slots=1)
    await runtime.connect()
    assert (await runtime.next_lease()).job_id == stranded
    await runtime.close()

    caplog.set_level(logging.ERROR, logger="scheduler_service")
    await outage.begin()
    began = time.monotonic()
    await eventually(_health_is(scheduler, NOT_SERVING))
    request = job_pb.CreateJobRequest(job_type="synthetic_echo")
    request.snapshot.update({"text": "during"})
    await _unavailable(jobs.stub.CreateJob(request, metadata=jobs.metadata, timeout=60))
    await _unavailable(jobs.get(stranded))
    refusals = _poll_answers("UNAVAILABLE")
    refused = ClientRuntime(scheduler.channel, "rt-during", slots=1)
    await refused.connect()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await refused.stream_end()
    await refused.close()
    # The server's answer, as it counted it. The client reads it too, unless its subscribe was
    # still being written when the answer came: grpc.aio then reports the failed write as
    # INTERNAL "Internal error from Core" in place of the server's status (grpc/grpc#36066).
    assert _poll_answers("UNAVAILABLE") == refusals + 1
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE or _write_lost_to_status(caught.value)
    await outage.heal()

    await eventually(_health_is(scheduler, SERVING))
    created = (await jobs.create()).job_id
    worker = ClientRuntime(scheduler.channel, "rt-after", slots=4)
    await worker.connect()
    try:
        leased = {(await worker.next_lease()).job_id for _ in range(2)}
        assert leased == {created, stranded}  # the reaper took the stranded one back
    finally:
        await worker.close()

    async def published() -> bool:
        return "ai.job.enqueue" in await events(scheduler.app.engine, created)

    await eventually(published)
    assert (await job_row(scheduler.app.engine, stranded))["attemptCount"] == 2
    # Every line was written between the fault's start and now.
    fault_s = time.monotonic() - began
    for name in ("dispatcher", "outbox", "lease-keeper", "reaper", "watch-hub", "event-hub"):
        lines = [r for r in caplog.records if r.getMessage().startswith(f"{name} round failed")]
        assert len(lines) <= fault_s / LOG_EVERY_S + 1, (name, len(lines), fault_s)

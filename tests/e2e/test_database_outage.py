"""The database goes away for longer than a lease while a scheduler process and a runtime
process are working, then comes back (reliability S20).

The MariaDB here is the test's own (tests/own_mariadb.py), stopped cleanly and started again on
the same datadir. Both services must stay up; the scheduler's health goes NOT_SERVING and back
to SERVING; afterwards every job succeeded once and every event was published once. Leases are
judged by the database's clock, so the ones that ran out during the outage are taken back by the
reaper, and their late results are refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sqlalchemy import text

from aijob.harness.procs import free_port, launch_scheduler, wait_until_serving
from aijob.harness.runtime_client import JobClient
from aijob.harness.waiting import eventually
from runtime_service.scripted_model import ScriptedModelServer
from scheduler_service.db.engine import create_engine
from scheduler_service.migrate import migrate
from tests.support.fakes import model_server
from tests.support.ledger import (
    assert_every_job_once,
    read_ledger,
    succeeded_count,
    wait_until_published,
    wait_until_succeeded,
)
from tests.support.own_mariadb import OwnMariaDB
from tests.support.runtime_procs import Launcher, launch

__all__ = ["launch", "model_server"]

pytestmark = pytest.mark.mysql

JOBS_TOTAL = 60
LEASE_TTL_S, LEASE_GRACE_S = 2.0, 0.5
#: Longer than a lease and its grace: every lease held when the database went away runs out.
OUTAGE_S = LEASE_TTL_S + LEASE_GRACE_S + 1.5

Serving = health_pb2.HealthCheckResponse.ServingStatus


@pytest.fixture
async def own_database(tmp_path: Path) -> AsyncIterator[tuple[OwnMariaDB, str]]:
    server = OwnMariaDB(tmp_path / "mariadb")
    await asyncio.to_thread(server.install)
    await asyncio.to_thread(server.start)
    admin = create_engine(server.url("mysql"), pool_size=1)
    async with admin.begin() as conn:
        await conn.execute(text("CREATE DATABASE aijob"))
    await admin.dispose()
    url = server.url("aijob")
    await migrate(url)
    try:
        yield server, url
    finally:
        await asyncio.to_thread(server.stop)


async def _health(address: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        try:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=2
            )
        except grpc.aio.AioRpcError:
            return -1
        return int(reply.status)


async def _health_is(address: str, status: int) -> None:
    async def check() -> bool:
        return await _health(address) == status

    await eventually(check, within_s=60, every_s=0.1)


async def test_the_database_away_longer_than_a_lease(
    own_database: tuple[OwnMariaDB, str],
    launch: Launcher,
    model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:
    server, url = own_database
    address = f"127.0.0.1:{free_port()}"
    scheduler = launch_scheduler(
        url,
        address,
        tmp_path / "scheduler.log",
        AIJOB_LEASE_TTL_S=str(LEASE_TTL_S),
        AIJOB_LEASE_GRACE_S=str(LEASE_GRACE_S),
        AIJOB_REAPER_INTERVAL_S="0.2",
        AIJOB_HEALTH_INTERVAL_S="0.1",
    )
    try:
        await asyncio.to_thread(wait_until_serving, address)
        model_server.state.default_fault = "latency:300"  # jobs are in flight when it goes
        runtime = launch(address, "rt-outage", AIJOB_RUNTIME_SLOTS="8")
        async with grpc.aio.insecure_channel(address) as channel:
            jobs = JobClient(channel)
            for index in range(JOBS_TOTAL):
                await jobs.create(snapshot={"index": index})

        await wait_until_succeeded(url, JOBS_TOTAL // 4)
        done_before = await succeeded_count(url)
        await asyncio.to_thread(server.stop)
        assert done_before < JOBS_TOTAL - 8, "the outage must come while work is in flight"
        await _health_is(address, Serving.NOT_SERVING)
        await asyncio.sleep(OUTAGE_S)  # the fault itself: the database stays away this long
        assert scheduler.poll() is None and runtime.poll() is None, "a service died"
        await asyncio.to_thread(server.start)
        await _health_is(address, Serving.SERVING)

        await wait_until_succeeded(url, JOBS_TOTAL, within_s=120)
        await wait_until_published(url, 2 * JOBS_TOTAL, within_s=60)
        assert_every_job_once(await read_ledger(url), JOBS_TOTAL)
        assert runtime.poll() is None
    finally:
        scheduler.terminate()
        assert await asyncio.to_thread(scheduler.wait, 60) == 0

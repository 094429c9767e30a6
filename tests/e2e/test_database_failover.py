"""Failover to a healthy writer: the scheduler writes through the first reachable and
ready node of AIJOB_DATABASE_URL's host then AIJOB_DATABASE_FAILOVER_HOSTS; when that node stops,
new work goes to the next one; when it is back, the scheduler returns to it. Two MariaDB servers
of the test's own stand for the nodes (their data is not replicated: what is tested is where
the writes go; the Galera cluster's own tests are in tests/e2e/test_galera.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from devtools.harness.runtime_client import JobClient
from devtools.harness.waiting import eventually
from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.db.failover import Node, WriterChoice, galera_ready, parse_nodes
from tests.support.db_checks import JOBS
from tests.support.own_mariadb import OwnMariaDB
from tests.support.schedulers import SchedulerFactory
from tests.support.schema_copy import migrated

pytestmark = pytest.mark.mysql


async def _server(root: Path) -> OwnMariaDB:
    server = OwnMariaDB(root)
    await asyncio.to_thread(server.install)
    await asyncio.to_thread(server.start)
    admin = create_engine(server.url("mysql"), pool_size=1)
    async with admin.begin() as conn:
        await conn.execute(text("CREATE DATABASE aijob"))
    await admin.dispose()
    await migrated(server.url("aijob"))
    return server


@pytest.fixture
async def two_nodes(tmp_path: Path) -> AsyncIterator[tuple[OwnMariaDB, OwnMariaDB]]:
    # One after the other: two mariadb-install-db at once can trip over each other.
    first = await _server(tmp_path / "a")
    second = await _server(tmp_path / "b")
    try:
        yield first, second
    finally:
        for server in (first, second):
            await asyncio.to_thread(server.stop)


async def _jobs_on(server: OwnMariaDB) -> int:
    engine = create_engine(server.url("aijob"), pool_size=1)
    try:
        async with engine.connect() as conn:
            return int((await conn.execute(select(func.count()).select_from(JOBS))).scalar_one())
    finally:
        await engine.dispose()


async def test_writes_move_to_the_next_node_and_come_back(
    two_nodes: tuple[OwnMariaDB, OwnMariaDB], start_scheduler: SchedulerFactory
) -> None:
    first, second = two_nodes
    running = await start_scheduler(
        first.url("aijob"),
        database_failover_hosts=f"127.0.0.1:{second.port}",
        health_interval_s=0.1,
    )
    jobs = JobClient(running.channel)
    await jobs.create()
    assert (await _jobs_on(first), await _jobs_on(second)) == (1, 0)
    writer = running.app.writer
    assert writer is not None and writer.current == Node("127.0.0.1", first.port)

    await asyncio.to_thread(first.stop)

    async def created_on_second() -> bool:
        try:
            await jobs.create()
        except Exception:
            return False
        return True

    await eventually(created_on_second, within_s=60)
    assert writer.current == Node("127.0.0.1", second.port)
    assert await _jobs_on(second) >= 1

    await asyncio.to_thread(first.start)

    # Judged by where the jobs land, not by ``writer.current`` alone: that names the node of the
    # latest new connection, and a create already on a pooled connection to the second node can
    # finish after the health loop has moved the writer back.
    async def created_on_first() -> bool:
        await jobs.create()
        return await _jobs_on(first) >= 2

    await eventually(created_on_first, within_s=60)
    assert writer.current == Node("127.0.0.1", first.port)


async def test_a_node_without_galera_is_ready_and_an_unreachable_one_is_skipped(
    two_nodes: tuple[OwnMariaDB, OwnMariaDB],
) -> None:
    first, second = two_nodes
    await asyncio.to_thread(first.stop)
    choice = WriterChoice(first.url("aijob"), parse_nodes(f"127.0.0.1:{second.port}"))
    conn = await choice.connect()
    try:
        assert await galera_ready(conn) is None  # wsrep off: no Galera, ready when it answers
    finally:
        conn.close()
    assert choice.current == Node("127.0.0.1", second.port)
    assert await choice.preferred() == Node("127.0.0.1", second.port)
    assert parse_nodes("db-1:3307, db-2") == [Node("db-1", 3307), Node("db-2", 3306)]
    with pytest.raises(ValueError, match="host:port"):
        parse_nodes("db-1:port")

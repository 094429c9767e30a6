"""High availability on a 3-node MariaDB Galera cluster, started by the test from the
machine's ``mariadbd`` and ``galera-4``: two schedulers drain 2,000 jobs writing through node 1
with nodes 2 and 3 as failover hosts; node 1 is SIGKILLed mid-drain and restarted (it rejoins by
IST). Every job succeeds once with one artifact set, every event is published once, no call is
answered INTERNAL, leases flow again through another node, and once node 1 has synced the
schedulers write through it again. The failover time and the rate against one MariaDB are
``make bench-galera``'s figures (docs/operations/galera.md)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text

from devtools.harness.galera import GaleraCluster, create_schema, galera_missing
from devtools.harness.galera_drain import drain
from devtools.harness.waiting import eventually
from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.db.failover import WriterChoice
from tests.support.ledger import assert_every_job_once, read_ledger
from tests.support.schedulers import SchedulerFactory

pytestmark = [pytest.mark.mysql, pytest.mark.galera, pytest.mark.slow]

JOBS = 2_000


@pytest.fixture
async def cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[GaleraCluster]:
    missing = galera_missing()
    if missing is not None:
        if os.environ.get("AIJOB_REQUIRE_GALERA") == "1":
            pytest.fail(f"a Galera cluster is required here (AIJOB_REQUIRE_GALERA=1): {missing}")
        pytest.skip(f"no Galera cluster can start here: {missing}")
    root = tmp_path_factory.mktemp("galera")
    galera = GaleraCluster(root)
    try:
        await asyncio.to_thread(galera.start, lambda url: asyncio.run(create_schema(url)))
        yield galera
    finally:
        await asyncio.to_thread(galera.stop)


async def _db_now(url: str) -> object:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            return (await conn.execute(text("SELECT UTC_TIMESTAMP(3)"))).scalar_one()
    finally:
        await engine.dispose()


async def _first_lease_after(url: str, moment: object) -> object:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            query = text("SELECT MIN(lockedAt) FROM AiAnalysisJob WHERE lockedAt > :t")
            return (await conn.execute(query, {"t": moment})).scalar_one()
    finally:
        await engine.dispose()


async def _scheduler_connections(url: str) -> int:
    """The schedulers' connections on a node (ours excluded)."""
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            query = text(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                "WHERE DB = 'aijob' AND ID <> CONNECTION_ID()"
            )
            return int((await conn.execute(query)).scalar_one())
    finally:
        await engine.dispose()


async def test_a_writer_killed_mid_drain_loses_nothing_and_is_used_again(
    cluster: GaleraCluster, tmp_path: Path
) -> None:
    first, second, third = cluster.nodes
    url = first.url("aijob")
    killed_at: list[object] = []

    async def kill_the_writer() -> None:
        await asyncio.to_thread(first.kill)  # the clock read after: it is surely dead by then
        killed_at.append(await _db_now(second.url("aijob")))

    async def rejoin_and_return() -> None:
        """The killed node rejoins by IST; once synced, the schedulers go back to it."""
        await asyncio.to_thread(first.restart_after_crash)
        await asyncio.to_thread(first.wait_synced)

        async def used_again() -> bool:
            return await _scheduler_connections(first.url("aijob")) > 0

        await eventually(used_again, within_s=120, every_s=0.5)

    result = await drain(
        url,
        JOBS,
        tmp_path,
        env={
            "AIJOB_DATABASE_FAILOVER_HOSTS": f"127.0.0.1:{second.port},127.0.0.1:{third.port}",
            "AIJOB_HEALTH_INTERVAL_S": "0.5",
            "AIJOB_LEASE_TTL_S": "10",
            "AIJOB_LEASE_GRACE_S": "5",
            "AIJOB_REAPER_INTERVAL_S": "1",
        },
        midway=kill_the_writer,
        midway_after=JOBS // 4,
        afterwards=rejoin_and_return,
    )
    assert "INTERNAL" not in result.codes and "UNKNOWN" not in result.codes, result.codes
    ledger = await read_ledger(second.url("aijob"))
    assert_every_job_once(ledger, JOBS)
    first_after = await _first_lease_after(second.url("aijob"), killed_at[0])
    assert first_after is not None, "no lease was given after the writer died"
    print(f"\nfirst lease after the kill: {(first_after - killed_at[0]).total_seconds():.1f} s")  # type: ignore[operator]

    # Causal reads, for replicas writing through different nodes: each session waits for the
    # cluster's earlier commits before it reads.
    causal = WriterChoice(second.url("aijob"), [], causal_reads=True)
    conn = await causal.connect()
    try:
        async with conn.cursor() as cursor:
            await cursor.execute("SELECT @@session.wsrep_sync_wait")
            assert (await cursor.fetchone())[0] == 3
    finally:
        conn.close()


async def _on(url: str, statement: str, **params: object) -> list[tuple[object, ...]]:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn:
            # Read what every node has committed (Galera applies on the others asynchronously).
            await conn.execute(text("SET SESSION wsrep_sync_wait = 1"))
            result = await conn.execute(text(statement), params)
            return [tuple(row) for row in result] if result.returns_rows else []
    finally:
        await engine.dispose()


async def test_the_shadow_write_is_two_way_on_every_node(
    cluster: GaleraCluster, start_scheduler: SchedulerFactory
) -> None:
    """System A's producer writes through one node, its worker through another: each node's
    triggers move lifecycleStatus with status, all three read the same, and a
    scheduler's sweeps through a third node leave the legacy-owned rows alone."""
    first, second, third = (node.url("aijob") for node in cluster.nodes)
    await _on(
        first,
        "INSERT INTO AiAnalysisJob (id, userId, answerId, jobType, status, progress, createdAt,"
        " updatedAt) VALUES ('legacy-g', 'legacy-user', 'answer-1', 'active-recall', 'pending',"
        " 0, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))",
    )
    read = "SELECT lifecycleStatus, status FROM AiAnalysisJob WHERE id = 'legacy-g'"
    for writer, status, lifecycle in [
        (second, "processing", "running"),
        (third, "completed", "succeeded"),
    ]:
        await _on(writer, "UPDATE AiAnalysisJob SET status = :s WHERE id = 'legacy-g'", s=status)
        for node in (first, second, third):
            assert await _on(node, read) == [(lifecycle, status)]
    scheduler = await start_scheduler(second, reaper_interval_s=3600)
    await _on(
        first,
        "INSERT INTO AiAnalysisJob (id, userId, answerId, jobType, status, progress, createdAt,"
        " updatedAt) VALUES ('legacy-h', 'legacy-user', 'answer-2', 'feynman-evaluation',"
        " 'pending', 0, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))",
    )
    for _ in range(10):
        assert await scheduler.app.reaper.reap_once() == 0
    owned = "SELECT lifecycleStatus, status FROM AiAnalysisJob WHERE id = 'legacy-h'"
    for node in (first, second, third):
        assert await _on(node, owned) == [("queued", "pending")]

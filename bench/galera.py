"""Galera (issue 19): the failover time, and two schedulers' drain on a 3-node cluster against
the same two schedulers on one MariaDB, in one run.

    python -m bench.galera        (make bench-galera; also in make bench)

Figures: ``galera_single_jobs_per_s`` (5,000 jobs, two schedulers, eight runtimes, one MariaDB),
``galera_jobs_per_s`` (the same on the cluster, writing through node 1, nodes 2 and 3 as
failover hosts), ``galera_vs_single`` (goal >= 0.8), and ``galera_failover_s``: node 1 SIGKILLed
a quarter into a second drain, the time from the signal to the first lease committed through
another node (goal <= 10 s; the nodes share the host's clock).
"""

from __future__ import annotations

import asyncio
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import text

from aijob.harness.galera import GaleraCluster, create_schema, galera_missing
from aijob.harness.galera_drain import drain
from bench.databases import throwaway_database
from scheduler_service.db.engine import create_engine

JOBS = 5_000


async def _scalar(url: str, query: str, **params: object) -> object:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            return (await conn.execute(text(query), params)).scalar_one()
    finally:
        await engine.dispose()


async def _cluster_figures(root: Path) -> dict[str, float]:
    cluster = GaleraCluster(root / "cluster")
    await asyncio.to_thread(cluster.start, lambda url: asyncio.run(create_schema(url)))
    try:
        first, second, third = cluster.nodes
        env = {
            "AIJOB_DATABASE_FAILOVER_HOSTS": f"127.0.0.1:{second.port},127.0.0.1:{third.port}",
            "AIJOB_HEALTH_INTERVAL_S": "0.5",
            "AIJOB_LEASE_TTL_S": "10",
            "AIJOB_LEASE_GRACE_S": "5",
            "AIJOB_REAPER_INTERVAL_S": "1",
        }
        steady = await drain(first.url("aijob"), JOBS, root / "steady", env=env)
        killed: list[datetime] = []
        last_by_the_dead: list[object] = []

        async def kill() -> None:
            # The nodes share the host's clock (one machine): the signal's instant, and then the
            # newest lease node 1 had committed (replicated before it committed: visible on the
            # others), so that a later one was surely committed through another node.
            killed.append(datetime.now(UTC).replace(tzinfo=None))
            await asyncio.to_thread(first.kill)
            newest = "SELECT MAX(lockedAt) FROM AiAnalysisJob"
            last_by_the_dead.append(await _scalar(second.url("aijob"), newest))

        await drain(
            first.url("aijob"), JOBS, root / "kill", env=env, midway=kill, midway_after=JOBS // 4
        )
        after = await _scalar(
            second.url("aijob"),
            "SELECT MIN(lockedAt) FROM AiAnalysisJob WHERE lockedAt > :t",
            t=last_by_the_dead[0],
        )
        assert isinstance(after, datetime)
        return {
            "galera_jobs_per_s": JOBS / steady.seconds,
            "galera_failover_s": (after - killed[0]).total_seconds(),
        }
    finally:
        await asyncio.to_thread(cluster.stop)


async def main() -> dict[str, float]:
    missing = galera_missing()
    if missing is not None:
        print(f"\ngalera: skipped ({missing})")
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        async with throwaway_database() as url:
            single = await drain(url, JOBS, root / "single")
        figures = {"galera_single_jobs_per_s": JOBS / single.seconds}
        figures |= await _cluster_figures(root)
    figures["galera_vs_single"] = figures["galera_jobs_per_s"] / figures["galera_single_jobs_per_s"]
    print(f"\ngalera: {JOBS} jobs, 2 schedulers x 4 runtimes x 16 slots, 3 nodes on loopback\n")
    for name, value in figures.items():
        print(f"{name:44} {value:10.3f}")
    return figures


if __name__ == "__main__":
    asyncio.run(main())

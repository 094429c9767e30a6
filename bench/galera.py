"""Galera (issue 19): the failover time, and two schedulers' drain on a 3-node cluster against
the same two schedulers on one MariaDB, in one run.

    python -m bench.galera        (make bench-galera; also in make bench)

The drains alternate, one MariaDB then the cluster, ``PAIRS`` times (a fresh database each), so
that the host's drift between two drains does not decide the ratio; the figures are medians.

``galera_single_jobs_per_s`` (5,000 jobs, two schedulers, eight runtimes, one MariaDB) and
``galera_jobs_per_s`` (the same on the cluster, writing through node 1, nodes 2 and 3 as failover
hosts), ``galera_vs_single`` (goal >= 0.8). The three nodes share the host's two cores with the
schedulers and the runtimes (docs/performance.md says what that costs).

``galera_failover_s``: node 1 SIGKILLed a quarter into a last drain, the time from the signal to
the first lease committed through another node (goal <= 10 s; the nodes share the host's clock).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import text

from aijob.harness.galera import GaleraCluster, create_schema, galera_missing
from aijob.harness.galera_drain import drain
from bench.databases import throwaway_database
from scheduler_service.db.engine import create_engine

JOBS = 5_000
PAIRS = 3


async def _scalar(url: str, query: str, **params: object) -> object:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            return (await conn.execute(text(query), params)).scalar_one()
    finally:
        await engine.dispose()


#: The schedulers' settings in every drain, on one server as on the cluster: what the failover
#: wants (a prompt health check, short leases) must not make the cluster's drains differ from
#: the single server's in anything but the database.
TUNING = {
    "AIJOB_HEALTH_INTERVAL_S": "0.5",
    "AIJOB_LEASE_TTL_S": "10",
    "AIJOB_LEASE_GRACE_S": "5",
    "AIJOB_REAPER_INTERVAL_S": "1",
}


def _failover_env(cluster: GaleraCluster) -> dict[str, str]:
    _, second, third = cluster.nodes
    hosts = f"127.0.0.1:{second.port},127.0.0.1:{third.port}"
    return {**TUNING, "AIJOB_DATABASE_FAILOVER_HOSTS": hosts}


async def _cluster_rate(cluster: GaleraCluster, log_dir: Path) -> float:
    async with throwaway_database(cluster.nodes[0].url("mysql")) as url:
        result = await drain(url, JOBS, log_dir, env=_failover_env(cluster))
    return JOBS / result.seconds


async def _single_rate(log_dir: Path) -> float:
    async with throwaway_database() as url:
        result = await drain(url, JOBS, log_dir, env=TUNING)
    return JOBS / result.seconds


async def _failover_s(cluster: GaleraCluster, log_dir: Path) -> float:
    first, second, _ = cluster.nodes
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

    env = _failover_env(cluster)
    await drain(first.url("aijob"), JOBS, log_dir, env=env, midway=kill, midway_after=JOBS // 4)
    after = await _scalar(
        second.url("aijob"),
        "SELECT MIN(lockedAt) FROM AiAnalysisJob WHERE lockedAt > :t",
        t=last_by_the_dead[0],
    )
    assert isinstance(after, datetime)
    return (after - killed[0]).total_seconds()


async def _figures(root: Path) -> dict[str, float]:
    cluster = GaleraCluster(root / "cluster")
    await asyncio.to_thread(cluster.start, lambda url: asyncio.run(create_schema(url)))
    try:
        single: list[float] = []
        clustered: list[float] = []
        for n in range(PAIRS):
            single.append(await _single_rate(root / f"single-{n}"))
            clustered.append(await _cluster_rate(cluster, root / f"cluster-{n}"))
            print(
                f"galera: drains {n + 1}: one MariaDB {single[-1]:.0f}, cluster "
                f"{clustered[-1]:.0f} jobs/s ({clustered[-1] / single[-1]:.2f})"
            )
        failover = await _failover_s(cluster, root / "kill")
    finally:
        await asyncio.to_thread(cluster.stop)
    one, many = statistics.median(single), statistics.median(clustered)
    return {
        "galera_single_jobs_per_s": one,
        "galera_jobs_per_s": many,
        "galera_vs_single": many / one,
        "galera_failover_s": failover,
    }


async def main() -> dict[str, float]:
    missing = galera_missing()
    if missing is not None:
        print(f"\ngalera: skipped ({missing})")
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        figures = await _figures(Path(tmp))
    print(
        f"\ngalera: {JOBS} jobs, 2 schedulers x 4 runtimes x 16 slots, 3 nodes on loopback, "
        f"medians of {PAIRS} alternating drains\n"
    )
    for name, value in figures.items():
        print(f"{name:44} {value:10.3f}")
    return figures


if __name__ == "__main__":
    asyncio.run(main())

"""Galera: the failover time, and two schedulers' drain on a 3-node cluster against
the same two schedulers on one MariaDB, in one run.

    python -m bench.galera        (make bench-galera; also in make bench)

The drains alternate, one MariaDB then the cluster, ``PAIRS`` times (a fresh database each), so
that the host's drift between two drains does not decide the ratio; the figures are medians.

``galera_single_jobs_per_s`` (5,000 jobs, two schedulers, eight runtimes, one MariaDB) and
``galera_jobs_per_s`` (the same on the cluster, writing through node 1, nodes 2 and 3 as failover
hosts), ``galera_vs_single`` (goal >= 0.8). The three nodes share the host's two cores with the
schedulers and the runtimes (docs/performance.md says what that costs).

CPU per job over the steady part of each drain (from a fifth of the jobs finished to the last):
``galera_single_cpu_ms_per_job`` and ``galera_cpu_ms_per_job`` (the whole host's, medians),
``galera_replicas_cpu_ms_per_job`` (nodes 2 and 3 applying the write sets), and
``galera_vs_single_ceiling_here``: the ratio the cluster could reach on these shared cores if it
cost the single server's CPU per job plus only what the replicas spend applying. Both drains are
CPU-bound here, so ``galera_vs_single`` stays below that ceiling by what the writer node's
replication and the schedulers' extra statements cost.

``galera_failover_s``: node 1 SIGKILLed a quarter into a last drain, the time from the signal to
the first lease committed through another node (goal <= 10 s; the nodes share the host's clock).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psutil
from sqlalchemy import text

from bench.databases import throwaway_database
from bench.sizes import size
from devtools.harness.galera import GaleraCluster, create_schema, galera_missing
from devtools.harness.galera_drain import drain
from scheduler_service.sql.db.engine import create_engine

JOBS = size("GALERA_JOBS", 5_000, 200)
PAIRS = size("GALERA_PAIRS", 3, 1)
#: The CPU per job is read from here to the end: the creates and the start are left out.
STEADY_FROM = JOBS // 5


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


@dataclass
class Drained:
    """One drain: its rate, and the CPU per job of its steady part (from a fifth of the jobs
    finished to the last), the host's and the replica nodes' (nodes 2 and 3 of the cluster)."""

    jobs_per_s: float
    host_cpu_ms: float
    replicas_cpu_ms: float = 0.0


class _SteadyCpu:
    """CPU seconds of the whole host and of some processes, marked twice."""

    def __init__(self, processes: Sequence[psutil.Process]) -> None:
        self._processes = processes
        self._marks: list[tuple[float, float]] = []

    async def mark(self) -> None:
        times = psutil.cpu_times()
        # guest time is inside user time; steal and idle are not this host's work.
        busy = times.user + times.nice + times.system + times.irq + times.softirq
        mine = sum(sum(p.cpu_times()[:2]) for p in self._processes)
        self._marks.append((busy, mine))

    def per_job_ms(self, jobs: int) -> tuple[float, float]:
        (busy0, mine0), (busy1, mine1) = self._marks
        return (busy1 - busy0) / jobs * 1e3, (mine1 - mine0) / jobs * 1e3


async def _drained(url: str, log_dir: Path, env: dict[str, str], replicas: list[int]) -> Drained:
    steady = _SteadyCpu([psutil.Process(pid) for pid in replicas])
    result = await drain(
        url,
        JOBS,
        log_dir,
        env=env,
        midway=steady.mark,
        midway_after=STEADY_FROM,
        afterwards=steady.mark,
    )
    host, replica = steady.per_job_ms(JOBS - STEADY_FROM)
    return Drained(JOBS / result.seconds, host, replica)


async def _cluster_drain(cluster: GaleraCluster, log_dir: Path) -> Drained:
    replicas = [node.process.pid for node in cluster.nodes[1:] if node.process is not None]
    async with throwaway_database(cluster.nodes[0].url("mysql")) as url:
        return await _drained(url, log_dir, _failover_env(cluster), replicas)


async def _single_drain(log_dir: Path) -> Drained:
    async with throwaway_database() as url:
        return await _drained(url, log_dir, TUNING, [])


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
        single: list[Drained] = []
        clustered: list[Drained] = []
        for n in range(PAIRS):
            single.append(await _single_drain(root / f"single-{n}"))
            clustered.append(await _cluster_drain(cluster, root / f"cluster-{n}"))
            one, many = single[-1], clustered[-1]
            print(
                f"galera: drains {n + 1}: one MariaDB {one.jobs_per_s:.0f}, cluster "
                f"{many.jobs_per_s:.0f} jobs/s ({many.jobs_per_s / one.jobs_per_s:.2f}); "
                f"CPU per job {one.host_cpu_ms:.2f} / {many.host_cpu_ms:.2f} ms, "
                f"nodes 2 and 3 {many.replicas_cpu_ms:.2f} ms"
            )
        failover = await _failover_s(cluster, root / "kill")
    finally:
        await asyncio.to_thread(cluster.stop)
    rate = statistics.median(d.jobs_per_s for d in single)
    rate_cluster = statistics.median(d.jobs_per_s for d in clustered)
    cpu = statistics.median(d.host_cpu_ms for d in single)
    cpu_cluster = statistics.median(d.host_cpu_ms for d in clustered)
    replicas = statistics.median(d.replicas_cpu_ms for d in clustered)
    return {
        "galera_single_jobs_per_s": rate,
        "galera_jobs_per_s": rate_cluster,
        "galera_vs_single": rate_cluster / rate,
        "galera_single_cpu_ms_per_job": cpu,
        "galera_cpu_ms_per_job": cpu_cluster,
        "galera_replicas_cpu_ms_per_job": replicas,
        # What the ratio could be on these shared cores if the cluster cost the single server's
        # CPU per job plus only its replicas' applying: nothing more on the writer node, in
        # the schedulers or in the runtimes.
        "galera_vs_single_ceiling_here": cpu / (cpu + replicas),
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

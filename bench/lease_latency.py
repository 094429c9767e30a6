"""Enqueue -> lease latency with one idle runtime, on MariaDB, over real gRPC.

Starts two scheduler processes on a throwaway database, connects one idle runtime (built on the
generated client) to the first, then creates jobs one at a time and times, for each, CreateJob's
round trip (the reference: what any write through the scheduler costs) and the moment the lease
arrives on the runtime's stream:

* same replica — created through the scheduler the runtime is connected to (wake on commit);
* other replica — created through the second scheduler (found by the dispatch poll,
  AIJOB_DISPATCH_POLL_MS, default 250 ms).

    python -m bench.lease_latency            # AIJOB_BENCH_JOBS (default 300) jobs per case
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
from sqlalchemy import text
from sqlalchemy.engine import make_url

from scheduler_service.db.engine import create_engine
from scheduler_service.migrate import migrate
from tests.procs import scheduler_processes
from tests.protocol.runtime_client import ClientRuntime, JobClient, echo_output

MYSQL_URL = os.environ.get("AIJOB_BENCH_MYSQL_URL", "mysql+asyncmy://root@127.0.0.1:3306/test")
JOBS = int(os.environ.get("AIJOB_BENCH_JOBS", "300"))


@asynccontextmanager
async def throwaway_database() -> AsyncIterator[str]:
    admin = create_engine(MYSQL_URL, pool_size=1)
    name = f"aijob_bench_{uuid.uuid4().hex[:8]}"
    async with admin.begin() as conn:
        await conn.execute(
            text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        )
    url = make_url(MYSQL_URL).set(database=name).render_as_string(hide_password=False)
    try:
        await migrate(url)
        yield url
    finally:
        async with admin.begin() as conn:
            await conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
        await admin.dispose()


def percentiles(samples: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50": cuts[49], "p95": cuts[94], "p99": cuts[98]}


async def measure(
    runtime: ClientRuntime, jobs: JobClient, count: int
) -> tuple[list[float], list[float]]:
    create_ms, lease_ms = [], []
    for index in range(count):
        start = time.perf_counter()
        created = await jobs.create(snapshot={"i": index})
        create_ms.append((time.perf_counter() - start) * 1000)
        lease = await runtime.next_lease()
        lease_ms.append((time.perf_counter() - start) * 1000)
        assert lease.job_id == created.job_id
        await runtime.submit(lease, echo_output(lease))
        runtime.credit()
    return create_ms, lease_ms


async def main() -> dict[str, float]:
    async with throwaway_database() as url:
        with scheduler_processes(url, 2) as (first, second):
            channels = [grpc.aio.insecure_channel(a) for a in (first, second)]
            runtime = ClientRuntime(channels[0], "bench-runtime", slots=1)
            await runtime.connect()
            try:
                await measure(runtime, JobClient(channels[0]), 20)  # warm up
                create_ms, same_ms = await measure(runtime, JobClient(channels[0]), JOBS)
                _, other_ms = await measure(runtime, JobClient(channels[1]), max(50, JOBS // 3))
            finally:
                await runtime.close()
                for channel in channels:
                    await channel.close(None)
    rows = {
        "CreateJob round trip (reference)": percentiles(create_ms),
        "enqueue -> lease, same replica": percentiles(same_ms),
        "enqueue -> lease, other replica": percentiles(other_ms),
    }
    print(f"\nenqueue -> lease latency, one idle runtime, {JOBS} jobs, MariaDB, 2 schedulers\n")
    print(f"{'':36} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for name, cut in rows.items():
        print(f"{name:36} {cut['p50']:8.2f} {cut['p95']:8.2f} {cut['p99']:8.2f}")
    same = rows["enqueue -> lease, same replica"]
    reference = rows["CreateJob round trip (reference)"]
    print(f"\nsame-replica lease p50 / CreateJob p50 = {same['p50'] / reference['p50']:.2f}")
    result = {
        "lease_latency_p50_ms": same["p50"],
        "lease_latency_p99_ms": same["p99"],
        "lease_latency_other_replica_p50_ms": rows["enqueue -> lease, other replica"]["p50"],
        "lease_latency_other_replica_p99_ms": rows["enqueue -> lease, other replica"]["p99"],
        "create_rpc_p50_ms": reference["p50"],
    }
    out = Path(__file__).parent / "results" / "lease_latency.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    asyncio.run(main())

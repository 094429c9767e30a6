"""Enqueue -> lease and enqueue -> succeeded latency with one idle runtime, on MariaDB, over real
gRPC.

Starts two scheduler processes on a throwaway database, connects one idle runtime (built on the
generated client) to the first, then creates jobs one at a time and times, for each, CreateJob's
round trip (the reference: what any write through the scheduler costs), the moment the lease
arrives on the runtime's stream, and the moment SubmitResult has committed. "Enqueue" is the
job's ``availableAt``, stamped by the database when CreateJob writes the row; the other figures
run from the start of the CreateJob call, so they include its round trip:

* same replica — created through the scheduler the runtime is connected to (wake on commit);
* other replica — created through the second scheduler (found by the dispatch poll,
  AIJOB_DISPATCH_POLL_MS, default 250 ms), fewer jobs since each waits for the poll.

    python -m bench.lease_latency            # AIJOB_BENCH_LATENCY_JOBS (default 1000)
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field
from datetime import UTC
from typing import cast

import grpc
from sqlalchemy import Table, select

from bench.databases import throwaway_database
from bench.sizes import size
from devtools.harness.procs import scheduler_processes
from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output
from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.db.models import AiJob

_jobs = cast(Table, AiJob.__table__)
JOBS = size("LATENCY_JOBS", 1000, 20)
OTHER_REPLICA_JOBS = size("OTHER_REPLICA_JOBS", 40, 5)


async def since_enqueued(url: str, leased_at: dict[str, float]) -> list[float]:
    """Milliseconds from each job's ``availableAt`` (written in the row by CreateJob, on the
    database's clock) to its lease reaching the runtime (this process's clock).

    Both clocks are this host's system clock when the database runs locally, as it does for
    ``make bench``; DATETIME(3) gives millisecond resolution.
    """
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                select(_jobs.c.id, _jobs.c.availableAt).where(_jobs.c.id.in_(list(leased_at)))
            )
            available = {r.id: r.availableAt.replace(tzinfo=UTC).timestamp() for r in rows}
    finally:
        await engine.dispose()
    return [(leased_at[job_id] - at) * 1000 for job_id, at in available.items()]


def percentiles(samples: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50": cuts[49], "p95": cuts[94], "p99": cuts[98]}


@dataclass
class Samples:
    create_ms: list[float] = field(default_factory=list)
    lease_ms: list[float] = field(default_factory=list)
    #: from CreateJob's reply (the job is committed by then) to the lease; may be negative
    after_reply_ms: list[float] = field(default_factory=list)
    succeeded_ms: list[float] = field(default_factory=list)
    #: job id -> wall-clock time its lease reached the runtime
    leased_at: dict[str, float] = field(default_factory=dict)


async def measure(runtime: ClientRuntime, jobs: JobClient, count: int) -> Samples:
    samples = Samples()
    for index in range(count):
        start = time.perf_counter()
        created = await jobs.create(snapshot={"i": index})
        replied = time.perf_counter()
        samples.create_ms.append((replied - start) * 1000)
        lease = await runtime.next_lease()
        # When the lease came off the stream, not when this loop got to it: the reply to
        # CreateJob, which this process handles too, may have been read in between.
        samples.leased_at[lease.job_id] = runtime.arrived[lease.job_id]
        leased = time.perf_counter()
        samples.lease_ms.append((leased - start) * 1000)
        samples.after_reply_ms.append((leased - replied) * 1000)
        assert lease.job_id == created.job_id
        await runtime.submit(lease, echo_output(lease))
        samples.succeeded_ms.append((time.perf_counter() - start) * 1000)
        runtime.credit()
    return samples


async def main(jobs: int = JOBS) -> dict[str, float]:
    async with throwaway_database() as url:
        with scheduler_processes(url, 2) as (first, second):
            channels = [grpc.aio.insecure_channel(a) for a in (first, second)]
            runtime = ClientRuntime(channels[0], "bench-runtime", slots=1)
            await runtime.connect()
            try:
                await measure(runtime, JobClient(channels[0]), 20)  # warm up
                same = await measure(runtime, JobClient(channels[0]), jobs)
                other = await measure(runtime, JobClient(channels[1]), OTHER_REPLICA_JOBS)
            finally:
                await runtime.close()
                for channel in channels:
                    await channel.close(None)
        enqueued_ms = await since_enqueued(url, same.leased_at)
    rows = {
        "CreateJob round trip (reference)": percentiles(same.create_ms),
        "enqueue -> lease, same replica": percentiles(enqueued_ms),
        "CreateJob reply -> lease, same replica": percentiles(same.after_reply_ms),
        "CreateJob call -> lease, same replica": percentiles(same.lease_ms),
        "CreateJob call -> succeeded": percentiles(same.succeeded_ms),
        "CreateJob call -> lease, other replica": percentiles(other.lease_ms),
    }
    print(f"\nlatency, one idle runtime, {jobs} jobs one at a time, MariaDB, 2 schedulers\n")
    print(f"{'':40} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for name, cut in rows.items():
        print(f"{name:40} {cut['p50']:8.2f} {cut['p95']:8.2f} {cut['p99']:8.2f}")
    lease = rows["enqueue -> lease, same replica"]
    succeeded = rows["CreateJob call -> succeeded"]
    return {
        "lease_latency_p50_ms": lease["p50"],
        "lease_latency_p95_ms": lease["p95"],
        "lease_latency_p99_ms": lease["p99"],
        "succeeded_latency_p50_ms": succeeded["p50"],
        "succeeded_latency_p95_ms": succeeded["p95"],
        "succeeded_latency_p99_ms": succeeded["p99"],
        "create_reply_to_lease_p50_ms": rows["CreateJob reply -> lease, same replica"]["p50"],
        "create_reply_to_lease_p99_ms": rows["CreateJob reply -> lease, same replica"]["p99"],
        "create_call_to_lease_p50_ms": rows["CreateJob call -> lease, same replica"]["p50"],
        "create_call_to_lease_p99_ms": rows["CreateJob call -> lease, same replica"]["p99"],
        "lease_latency_other_replica_p50_ms": rows["CreateJob call -> lease, other replica"]["p50"],
        "create_rpc_p50_ms": rows["CreateJob round trip (reference)"]["p50"],
    }


if __name__ == "__main__":
    asyncio.run(main())

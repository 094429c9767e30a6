"""Throughput: our drain rate next to the database ceiling for the same design, in one run.

* **ceiling** — a tight asyncmy loop doing only the minimum statements of a job's life on the same
  MariaDB (insert job + snapshot + outbox; CAS lock; CAS succeed + artifact + outbox), at the
  scheduler's connection concurrency (AIJOB_DB_POOL_SIZE, 20): the physical limit of the design.
* **ours** — N ``synthetic_echo`` jobs created through CreateJob (reported on its own), then
  drained by K runtimes (4 x 32 slots) over real gRPC from one scheduler process, counted when
  each result commits (SubmitResult answered).

    python -m bench.throughput          # AIJOB_BENCH_JOBS (default 5000)
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import asyncmy
import grpc
from sqlalchemy.engine import make_url

from bench.lease_latency import throwaway_database
from tests.procs import scheduler_processes
from tests.protocol.runtime_client import ClientRuntime, JobClient, echo_output

JOBS = int(os.environ.get("AIJOB_BENCH_JOBS", "5000"))
RUNTIMES, SLOTS, CONNECTIONS = 4, 32, 20
RESULTS = Path(__file__).parent / "results"

_CREATE = [
    "INSERT INTO AiAnalysisJob (id, userId, jobType, status, progress, queueName, lifecycleStatus,"
    " priority, attemptCount, maxAttempts, timeoutMs, availableAt, queuedAt, createdAt, updatedAt)"
    " VALUES (%s, 'bench', 'synthetic_echo', 'pending', 0, 'ai-interactive', 'queued', 50, 0, 3,"
    " 30000, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))",
    "INSERT INTO AiJobSnapshot (id, jobId, content, params, createdAt)"
    " VALUES (%s, %s, '{\"text\": \"hi\"}', '{}', UTC_TIMESTAMP(3))",
    "INSERT INTO OutboxEvent (eventType, aggregateType, aggregateId, dedupeKey, payload, status,"
    " attemptCount, availableAt, createdAt) VALUES ('ai.job.enqueue', 'AiJob', %s, %s,"
    " '{}', 'pending', 0, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))",
]
_LOCK = (
    "UPDATE AiAnalysisJob SET lifecycleStatus='running', status='processing', lockedBy='bench',"
    " lockedAt=UTC_TIMESTAMP(3), lockUntil=UTC_TIMESTAMP(3) + INTERVAL 60 SECOND,"
    " startedAt=UTC_TIMESTAMP(3), attemptCount=attemptCount+1, updatedAt=UTC_TIMESTAMP(3)"
    " WHERE id=%s AND lifecycleStatus='queued' AND availableAt <= UTC_TIMESTAMP(3)"
)
_SUCCEED = [
    "UPDATE AiAnalysisJob SET lifecycleStatus='succeeded', status='completed',"
    " finishedAt=UTC_TIMESTAMP(3), progress=100, updatedAt=UTC_TIMESTAMP(3)"
    " WHERE id=%s AND lifecycleStatus='running' AND attemptCount=1 AND lockedBy='bench'",
    "INSERT INTO AiJobArtifact (id, jobId, attemptNo, artifactType, artifactId, ordinal, createdAt)"
    " VALUES (%s, %s, 1, 'SyntheticEcho', %s, 0, UTC_TIMESTAMP(3))",
    "INSERT INTO OutboxEvent (eventType, aggregateType, aggregateId, dedupeKey, payload, status,"
    " attemptCount, availableAt, createdAt) VALUES ('ai.job.completed', 'AiJob', %s, %s,"
    " '{}', 'pending', 0, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))",
]


async def ceiling(url: str, jobs: int) -> float:
    """Jobs per second for the minimum statements of a job's life (three commits per job)."""
    parsed = make_url(url)
    pool = await asyncmy.create_pool(
        host=parsed.host,
        port=parsed.port or 3306,
        user=parsed.username,
        password=parsed.password or "",
        db=parsed.database,
        minsize=CONNECTIONS,
        maxsize=CONNECTIONS,
        autocommit=False,
    )

    async def one_job(conn: Any) -> None:
        job_id = str(uuid.uuid4())
        async with conn.cursor() as cur:
            await cur.execute(_CREATE[0], (job_id,))
            await cur.execute(_CREATE[1], (str(uuid.uuid4()), job_id))
            await cur.execute(_CREATE[2], (job_id, f"enqueue:{job_id}"))
            await conn.commit()
            await cur.execute(_LOCK, (job_id,))
            assert cur.rowcount == 1
            await conn.commit()
            await cur.execute(_SUCCEED[0], (job_id,))
            assert cur.rowcount == 1
            await cur.execute(_SUCCEED[1], (str(uuid.uuid4()), job_id, job_id))
            await cur.execute(_SUCCEED[2], (job_id, f"completed:{job_id}"))
            await conn.commit()

    async def worker(count: int) -> None:
        async with pool.acquire() as conn:
            for _ in range(count):
                await one_job(conn)

    started = time.perf_counter()
    share = [jobs // CONNECTIONS + (1 if i < jobs % CONNECTIONS else 0) for i in range(CONNECTIONS)]
    await asyncio.gather(*(worker(n) for n in share))
    elapsed = time.perf_counter() - started
    pool.close()
    await pool.wait_closed()
    return jobs / elapsed


async def ours(url: str, jobs: int) -> tuple[float, float]:
    """(create jobs/s through CreateJob, drain jobs/s by 4 runtimes) against one scheduler."""
    with scheduler_processes(url, 1) as (address,):
        async with grpc.aio.insecure_channel(address) as channel:
            clients = [JobClient(channel, f"bench-{u}") for u in range(64)]
            semaphore = asyncio.Semaphore(32)

            async def create(index: int) -> None:
                async with semaphore:
                    await clients[index % len(clients)].create(snapshot={"i": index})

            started = time.perf_counter()
            await asyncio.gather(*(create(i) for i in range(jobs)))
            create_rate = jobs / (time.perf_counter() - started)

            done = asyncio.Event()
            finished = 0
            runtimes = [
                ClientRuntime(channel, f"bench-rt-{r}", slots=SLOTS) for r in range(RUNTIMES)
            ]

            async def finish(runtime: ClientRuntime, lease: Any) -> None:
                nonlocal finished
                await runtime.submit(lease, echo_output(lease))
                runtime.credit()
                finished += 1
                if finished == jobs:
                    done.set()

            async def work(runtime: ClientRuntime) -> None:
                await runtime.connect()
                running: set[asyncio.Task[None]] = set()
                while True:
                    lease = await runtime.leases.get()
                    task = asyncio.ensure_future(finish(runtime, lease))
                    running.add(task)
                    task.add_done_callback(running.discard)

            started = time.perf_counter()
            workers = [asyncio.ensure_future(work(r)) for r in runtimes]
            await asyncio.wait_for(done.wait(), timeout=600)
            drain_rate = jobs / (time.perf_counter() - started)
            for worker in workers:
                worker.cancel()
            for runtime in runtimes:
                await runtime.close()
    return create_rate, drain_rate


async def main() -> dict[str, float]:
    async with throwaway_database() as url:
        ceiling_rate = await ceiling(url, JOBS)
    async with throwaway_database() as url:
        create_rate, drain_rate = await ours(url, JOBS)
    result = {
        "jobs": float(JOBS),
        "ceiling_jobs_per_s": ceiling_rate,
        "ours_create_jobs_per_s": create_rate,
        "ours_jobs_per_s": drain_rate,
        "ours_vs_ceiling": drain_rate / ceiling_rate,
    }
    setup = f"{JOBS} synthetic_echo jobs, MariaDB, 1 scheduler, {RUNTIMES}x{SLOTS} slots"
    print(f"\nthroughput, {setup}\n")
    print(f"{'ceiling (3 commits/job, 20 connections)':44} {ceiling_rate:10.0f} jobs/s")
    print(f"{'ours: CreateJob':44} {create_rate:10.0f} jobs/s")
    print(f"{'ours: drain (lease → SubmitResult committed)':44} {drain_rate:10.0f} jobs/s")
    print(f"\nours / ceiling = {drain_rate / ceiling_rate:.2f}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "throughput.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    asyncio.run(main())

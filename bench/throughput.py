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
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any

import asyncmy
import grpc
from sqlalchemy.engine import make_url

from aijob.harness.procs import scheduler_processes
from aijob.harness.runtime_client import ClientRuntime, JobClient, echo_output
from bench.databases import jobs_per_second, throwaway_database

JOBS = int(os.environ.get("AIJOB_BENCH_JOBS", "5000"))
RUNTIMES, SLOTS, CONNECTIONS = 4, 32, 20

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

    try:
        return await jobs_per_second(pool, CONNECTIONS, jobs, one_job)
    finally:
        pool.close()
        await pool.wait_closed()


@dataclass(frozen=True)
class Drain:
    create_jobs_per_s: float
    drain_jobs_per_s: float


async def drain(
    url: str, jobs: int, *, runtimes: int = RUNTIMES, replicas: int = 1, slots: int = SLOTS
) -> Drain:
    """Create ``jobs`` through CreateJob (32 callers), then drain them with ``runtimes`` runtimes
    spread over ``replicas`` scheduler processes, counting each job when its result commits."""
    with scheduler_processes(url, replicas) as addresses:
        channels = [grpc.aio.insecure_channel(address) for address in addresses]
        try:
            create_rate = await _create(channels, jobs)
            drain_rate = await _drain(channels, jobs, runtimes, slots)
        finally:
            for channel in channels:
                await channel.close(None)
    return Drain(create_rate, drain_rate)


async def _create(channels: list[grpc.aio.Channel], jobs: int) -> float:
    clients = [JobClient(channels[u % len(channels)], f"bench-{u}") for u in range(64)]
    semaphore = asyncio.Semaphore(32)

    async def create(index: int) -> None:
        async with semaphore:
            await clients[index % len(clients)].create(snapshot={"i": index})

    started = time.perf_counter()
    await asyncio.gather(*(create(i) for i in range(jobs)))
    return jobs / (time.perf_counter() - started)


async def _drain(channels: list[grpc.aio.Channel], jobs: int, count: int, slots: int) -> float:
    done = asyncio.Event()
    finished = 0
    runtimes = [
        ClientRuntime(channels[r % len(channels)], f"bench-rt-{r}", slots=slots)
        for r in range(count)
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
    try:
        await asyncio.wait_for(done.wait(), timeout=600)
        return jobs / (time.perf_counter() - started)
    finally:
        for worker in workers:
            worker.cancel()
        for runtime in runtimes:
            await runtime.close()


async def main(jobs: int = JOBS) -> dict[str, float]:
    async with throwaway_database() as url:
        ceiling_rate = await ceiling(url, jobs)
    async with throwaway_database() as url:
        ours = await drain(url, jobs)
    print(f"\nthroughput, {jobs} synthetic_echo jobs, MariaDB, 1 scheduler, {RUNTIMES}x{SLOTS}\n")
    print(f"{'ceiling (3 commits/job, 20 connections)':44} {ceiling_rate:10.0f} jobs/s")
    print(f"{'ours: CreateJob, 32 callers':44} {ours.create_jobs_per_s:10.0f} jobs/s")
    print(f"{'ours: drain (lease → result committed)':44} {ours.drain_jobs_per_s:10.0f} jobs/s")
    return {
        "jobs": float(jobs),
        "ceiling_jobs_per_s": ceiling_rate,
        "ours_create_jobs_per_s": ours.create_jobs_per_s,
        "ours_jobs_per_s": ours.drain_jobs_per_s,
    }


if __name__ == "__main__":
    asyncio.run(main())

"""The peer: PgQueuer draining N no-op jobs on this machine's PostgreSQL, next to the raw
PostgreSQL ceiling of our own design measured the same way as the MariaDB one.

* **peer** — N no-op jobs enqueued in batches, then drained by K PgQueuer ``QueueManager``\\ s
  (one asyncpg connection each, ``max_concurrent_tasks`` = slots), the same 4 x 32 concurrency as
  our runtimes; timed from the start of the drain until every manager has flushed its completions.
* **PostgreSQL ceiling** — the ceiling loop of ``bench.throughput`` (insert job + snapshot +
  outbox; CAS lock; CAS succeed + artifact + outbox; three commits per job) on PostgreSQL at the
  same connection concurrency, so the two databases can be told apart from the two designs.

    python -m bench.peer          # AIJOB_BENCH_JOBS, AIJOB_BENCH_PG_URL
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import asyncpg
from pgqueuer import AsyncpgDriver, Job, Queries, QueueManager
from pgqueuer.types import QueueExecutionMode
from sqlalchemy.engine import make_url

from bench.databases import jobs_per_second
from bench.sizes import size

PG_URL = os.environ.get("AIJOB_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
JOBS = size("JOBS", 5000, 200)
WORKERS, SLOTS, BATCH, CONNECTIONS = 4, 32, 10, 20

_SCHEMA = [
    "CREATE TABLE job (id uuid PRIMARY KEY, user_id text NOT NULL, job_type text NOT NULL,"
    " lifecycle_status text NOT NULL, priority int NOT NULL, attempt_count int NOT NULL,"
    " max_attempts int NOT NULL, locked_by text, lock_until timestamptz, started_at timestamptz,"
    " finished_at timestamptz, available_at timestamptz NOT NULL, created_at timestamptz NOT NULL,"
    " updated_at timestamptz NOT NULL)",
    "CREATE INDEX job_dispatch ON job (lifecycle_status, job_type, priority, available_at)",
    "CREATE TABLE snapshot (id uuid PRIMARY KEY, job_id uuid NOT NULL, content jsonb NOT NULL,"
    " created_at timestamptz NOT NULL)",
    "CREATE TABLE outbox (id bigserial PRIMARY KEY, event_type text NOT NULL,"
    " aggregate_id uuid NOT NULL, dedupe_key text NOT NULL UNIQUE, payload jsonb NOT NULL,"
    " status text NOT NULL, created_at timestamptz NOT NULL)",
    "CREATE TABLE artifact (id uuid PRIMARY KEY, job_id uuid NOT NULL, attempt_no int NOT NULL,"
    " artifact_id uuid NOT NULL, created_at timestamptz NOT NULL,"
    " UNIQUE (job_id, attempt_no, artifact_id))",
]
_CREATE = [
    "INSERT INTO job VALUES ($1, 'bench', 'synthetic_echo', 'queued', 50, 0, 3, NULL, NULL,"
    " NULL, NULL, now(), now(), now())",
    'INSERT INTO snapshot VALUES ($1, $2, \'{"text": "hi"}\', now())',
    "INSERT INTO outbox (event_type, aggregate_id, dedupe_key, payload, status, created_at)"
    " VALUES ('ai.job.enqueue', $1, $2, '{}', 'pending', now())",
]
_LOCK = (
    "UPDATE job SET lifecycle_status='running', locked_by='bench', lock_until=now() + interval"
    " '60 seconds', started_at=now(), attempt_count=attempt_count+1, updated_at=now()"
    " WHERE id=$1 AND lifecycle_status='queued' AND available_at <= now()"
)
_SUCCEED = [
    "UPDATE job SET lifecycle_status='succeeded', finished_at=now(), updated_at=now()"
    " WHERE id=$1 AND lifecycle_status='running' AND attempt_count=1 AND locked_by='bench'",
    "INSERT INTO artifact VALUES ($1, $2, 1, $2, now())",
    "INSERT INTO outbox (event_type, aggregate_id, dedupe_key, payload, status, created_at)"
    " VALUES ('ai.job.completed', $1, $2, '{}', 'pending', now())",
]


async def reachable(url: str = PG_URL) -> str | None:
    """None when PostgreSQL answers at ``url``, else why not (the peer row says so)."""
    try:
        conn = await asyncpg.connect(url, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        shown = make_url(url).render_as_string(hide_password=True)
        return f"PostgreSQL not reachable at {shown}: {type(exc).__name__}"
    await conn.close()
    return None


@asynccontextmanager
async def throwaway_pg_database() -> AsyncIterator[str]:
    admin = await asyncpg.connect(PG_URL)
    name = f"aijob_bench_{uuid.uuid4().hex[:8]}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(PG_URL, name)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def _with_database(url: str, name: str) -> str:
    base, _, _ = url.rpartition("/")
    return f"{base}/{name}"


def _affected(status: str) -> int:
    return int(status.rsplit(" ", 1)[-1])


async def pg_ceiling(dsn: str, jobs: int) -> float:
    """Jobs per second for our design's minimum statements on PostgreSQL (three commits/job)."""
    setup = await asyncpg.connect(dsn)
    for statement in _SCHEMA:
        await setup.execute(statement)
    await setup.close()
    pool = await asyncpg.create_pool(dsn, min_size=CONNECTIONS, max_size=CONNECTIONS)

    async def one_job(conn: Any) -> None:
        job_id = uuid.uuid4()
        async with conn.transaction():
            await conn.execute(_CREATE[0], job_id)
            await conn.execute(_CREATE[1], uuid.uuid4(), job_id)
            await conn.execute(_CREATE[2], job_id, f"enqueue:{job_id}")
        async with conn.transaction():
            assert _affected(await conn.execute(_LOCK, job_id)) == 1
        async with conn.transaction():
            assert _affected(await conn.execute(_SUCCEED[0], job_id)) == 1
            await conn.execute(_SUCCEED[1], uuid.uuid4(), job_id)
            await conn.execute(_SUCCEED[2], job_id, f"completed:{job_id}")

    try:
        return await jobs_per_second(pool, CONNECTIONS, jobs, one_job)
    finally:
        await pool.close()


async def pgqueuer_drain(dsn: str, jobs: int) -> float:
    """Jobs per second for PgQueuer draining ``jobs`` no-op jobs with WORKERS x SLOTS."""
    setup = await asyncpg.connect(dsn)
    queries = Queries(AsyncpgDriver(setup))
    await queries.install()
    for start in range(0, jobs, 1000):
        count = min(1000, jobs - start)
        await queries.enqueue(["noop"] * count, [b'{"text": "hi"}'] * count, [0] * count)
    await setup.close()

    done = 0

    async def noop(job: Job) -> None:
        nonlocal done
        done += 1

    connections = [await asyncpg.connect(dsn) for _ in range(WORKERS)]
    managers = []
    for conn in connections:
        manager = QueueManager(Queries(AsyncpgDriver(conn)))
        manager.entrypoint("noop")(noop)
        managers.append(manager)
    started = time.perf_counter()
    await asyncio.gather(
        *(
            manager.run(
                dequeue_timeout=timedelta(seconds=1),
                batch_size=BATCH,
                mode=QueueExecutionMode.drain,
                max_concurrent_tasks=SLOTS,
            )
            for manager in managers
        )
    )
    elapsed = time.perf_counter() - started
    for conn in connections:
        await conn.close()
    assert done == jobs, f"PgQueuer ran {done} of {jobs} jobs"
    return jobs / elapsed


async def main(jobs: int = JOBS) -> dict[str, float | str | None]:
    """The peer's figures; ``peer_skipped`` says why they are missing when PostgreSQL is."""
    missing = await reachable()
    if missing is not None:
        print(f"\npeer: skipped, {missing}")
        return {"peer_jobs_per_s": None, "pg_ceiling_jobs_per_s": None, "peer_skipped": missing}
    async with throwaway_pg_database() as dsn:
        ceiling = await pg_ceiling(dsn, jobs)
    async with throwaway_pg_database() as dsn:
        peer = await pgqueuer_drain(dsn, jobs)
    print(f"\npeer, {jobs} no-op jobs, PostgreSQL, {WORKERS}x{SLOTS} slots\n")
    print(f"{'PostgreSQL ceiling (our design, 3 commits/job)':48} {ceiling:10.0f} jobs/s")
    print(f"{'PgQueuer drain':48} {peer:10.0f} jobs/s")
    return {"peer_jobs_per_s": peer, "pg_ceiling_jobs_per_s": ceiling, "peer_skipped": None}


if __name__ == "__main__":
    asyncio.run(main())

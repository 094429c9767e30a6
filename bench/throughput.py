"""Throughput: our drain rate next to the database ceiling for the same design, in one run.

* **ceiling** — a tight asyncmy loop doing only the minimum statements of a job's life on the same
  MariaDB (insert job + snapshot + outbox; CAS lock; CAS succeed + artifact + outbox), at the
  scheduler's connection concurrency (AIJOB_DB_POOL_SIZE, 20): the physical limit of the design.
* **batched ceiling** — the same statements with 50 jobs per transaction (multi-row inserts, one
  UPDATE per step for the whole batch): the physical limit of a batched design.
* **ours** — N ``synthetic_echo`` jobs created through CreateJob (reported on its own), then
  drained by K runtimes (4 x 32 slots) over real gRPC from one scheduler process, counted when
  each result commits: reported on the Poll stream and acked (``ours``), again with the unary
  SubmitResult (``ours_unary``).
* **with chunks** — partial outputs on: the output's text sent as an OutputChunk report in the
  result's frame. Only types that stream their answer store chunks, so both sides of these pairs
  drain ``quiz_generation`` jobs (one question each, projected). Measured in adjacent pairs
  against the same drain without, on one scheduler (``chunk_pairs``): ``chunks_drain_vs_plain``
  is the median of the pairs' ratios.

    python -m bench.throughput          # AIJOB_BENCH_JOBS (default 5000)
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from dataclasses import dataclass
from typing import Any

import asyncmy
import grpc
import psutil
from google.protobuf import json_format
from sqlalchemy.engine import make_url

from bench.databases import CpuMeter, CpuSplit, SplitMeter, jobs_per_second, throwaway_database
from bench.sizes import size
from devtools.harness.procs import scheduler_processes, spawn_schedulers
from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output, working
from shared.gen.aijob.v1 import job_service_pb2 as job_pb

JOBS = size("JOBS", 5000, 200)
#: Adjacent pairs of drains, with and without output chunks.
PAIRS = size("CHUNK_PAIRS", 3, 1)
RUNTIMES, SLOTS, CONNECTIONS = 4, 32, 20
#: The chunk pairs' job type (it streams its answer), a snapshot it takes and an answer it accepts.
STREAMING_TYPE = "quiz_generation"
STREAMING_SNAPSHOT: dict[str, Any] = {
    "learner": {"id": "l-1"},
    "material": {"id": "m-1", "title": "Cells"},
    "knowledgePoints": [{"id": "k-1", "name": "Mitochondria", "mastery": 0.2}],
}
STREAMING_OUTPUT: dict[str, Any] = {
    "questions": [
        {
            "questionType": "single_choice",
            "stem": "Which organelle makes ATP?",
            "choices": [{"key": "A", "text": "Mitochondria"}, {"key": "B", "text": "Nucleus"}],
            "answer": "A",
            "explanation": "Mitochondria make ATP.",
            "difficulty": "easy",
        }
    ]
}

_CREATE = [
    "INSERT INTO AiAnalysisJob (id, userId, jobType, status, progress, queueName, lifecycleStatus,"
    " priority, attemptCount, maxAttempts, timeoutMs, promptVersion, availableAt, queuedAt,"
    " createdAt, updatedAt) VALUES (%s, 'bench', 'synthetic_echo', 'pending', 0, 'ai-interactive',"
    " 'queued', 50, 0, 3, 30000, 'v1', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), UTC_TIMESTAMP(3),"
    " UTC_TIMESTAMP(3))",
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


async def _pool(url: str, **options: Any) -> Any:
    """An asyncmy pool of CONNECTIONS connections to ``url``, autocommit off."""
    parsed = make_url(url)
    return await asyncmy.create_pool(
        host=parsed.host,
        port=parsed.port or 3306,
        user=parsed.username,
        password=parsed.password or "",
        db=parsed.database,
        minsize=CONNECTIONS,
        maxsize=CONNECTIONS,
        autocommit=False,
        **options,
    )


async def ceiling(url: str, jobs: int) -> float:
    """Jobs per second for the minimum statements of a job's life (three commits per job)."""
    pool = await _pool(url)

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


BATCH = 50


def _values(rows: int, one: str) -> str:
    return ", ".join([one] * rows)


@dataclass(frozen=True)
class Batched:
    jobs_per_s: float
    #: CPU of the loop and the database server per job: what the batched SQL alone costs.
    cpu_us_per_job: float


async def batched_ceiling(url: str, jobs: int) -> Batched:
    """Jobs per second for the same statements, ``BATCH`` jobs per transaction, and the CPU they
    cost (this process and the database server)."""
    # Our sessions run READ COMMITTED (scheduler_service/sql/db/engine.py); so does this loop, which
    # without it deadlocks on the gap locks of its own multi-row inserts.
    pool = await _pool(url, init_command="SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
    head = [statement.split(" VALUES ")[0] for statement in _CREATE]
    tuples = [statement.split(" VALUES ")[1] for statement in _CREATE]
    art_head, art_tuple = _SUCCEED[1].split(" VALUES ")
    out_head, out_tuple = _SUCCEED[2].split(" VALUES ")

    async def one_batch(conn: Any) -> None:
        ids = [str(uuid.uuid4()) for _ in range(BATCH)]
        marks = ", ".join(["%s"] * BATCH)
        async with conn.cursor() as cur:
            await cur.execute(f"{head[0]} VALUES {_values(BATCH, tuples[0])}", ids)
            await cur.execute(
                f"{head[1]} VALUES {_values(BATCH, tuples[1])}",
                [v for i in ids for v in (str(uuid.uuid4()), i)],
            )
            await cur.execute(
                f"{head[2]} VALUES {_values(BATCH, tuples[2])}",
                [v for i in ids for v in (i, f"enqueue:{i}")],
            )
            await conn.commit()
            await cur.execute(_LOCK.replace("id=%s", f"id IN ({marks})"), ids)
            assert cur.rowcount == BATCH
            await conn.commit()
            await cur.execute(_SUCCEED[0].replace("id=%s", f"id IN ({marks})"), ids)
            assert cur.rowcount == BATCH
            await cur.execute(
                f"{art_head} VALUES {_values(BATCH, art_tuple)}",
                [v for i in ids for v in (str(uuid.uuid4()), i, i)],
            )
            await cur.execute(
                f"{out_head} VALUES {_values(BATCH, out_tuple)}",
                [v for i in ids for v in (i, f"completed:{i}")],
            )
            await conn.commit()

    try:
        meter = CpuMeter()
        rate = BATCH * await jobs_per_second(pool, CONNECTIONS, jobs // BATCH, one_batch)
        return Batched(rate, 1e6 * meter.seconds() / (BATCH * (jobs // BATCH)))
    finally:
        pool.close()
        await pool.wait_closed()


@dataclass(frozen=True)
class Drain:
    create_jobs_per_s: float
    drain_jobs_per_s: float
    #: CPU per drained job of each side, in microseconds.
    cpu_us_per_job: CpuSplit


async def drain(
    url: str,
    jobs: int,
    *,
    runtimes: int = RUNTIMES,
    replicas: int = 1,
    slots: int = SLOTS,
    stream: bool = True,
    chunks: bool = False,
) -> Drain:
    """Create ``jobs`` through CreateJob (32 callers), then drain them with ``runtimes`` runtimes
    spread over ``replicas`` scheduler processes, counting each job when its result commits
    (reported on the Poll stream, or with unary SubmitResult calls)."""
    with spawn_schedulers(url, replicas) as schedulers:
        channels = [grpc.aio.insecure_channel(s.address) for s in schedulers]
        try:
            create_rate = await _create(channels, jobs)
            meter = SplitMeter([psutil.Process(s.process.pid) for s in schedulers])
            drain_rate = await _drain(channels, jobs, runtimes, slots, stream, chunks=chunks)
            split = meter.split()
        finally:
            for channel in channels:
                await channel.close(None)
    per_job = CpuSplit(
        1e6 * split.scheduler / jobs,
        None if split.database is None else 1e6 * split.database / jobs,
        1e6 * split.runtimes / jobs,
    )
    return Drain(create_rate, drain_rate, per_job)


async def _create(channels: list[grpc.aio.Channel], jobs: int) -> float:
    clients = [JobClient(channels[u % len(channels)], f"bench-{u}") for u in range(64)]
    semaphore = asyncio.Semaphore(32)

    async def create(index: int) -> None:
        async with semaphore:
            await clients[index % len(clients)].create(snapshot={"i": index})

    started = time.perf_counter()
    await asyncio.gather(*(create(i) for i in range(jobs)))
    return jobs / (time.perf_counter() - started)


async def _drain(
    channels: list[grpc.aio.Channel],
    jobs: int,
    count: int,
    slots: int,
    stream: bool,
    *,
    chunks: bool = False,
    streaming: bool = False,
) -> float:
    done = asyncio.Event()
    finished = 0
    job_types = [STREAMING_TYPE if streaming else "synthetic_echo"]
    runtimes = [
        ClientRuntime(
            channels[r % len(channels)],
            f"bench-rt-{r}",
            job_types=job_types,
            slots=slots,
            batch_frames=True,
        )
        for r in range(count)
    ]

    def output(lease: Any) -> Any:
        return STREAMING_OUTPUT if streaming else echo_output(lease)

    async def finish(runtime: ClientRuntime, lease: Any) -> None:
        nonlocal finished
        if chunks:
            ack = await runtime.submit_streamed(lease, output(lease))
            assert ack.status.code == 0, ack.status
        elif stream:
            ack = await runtime.submit_on_stream(lease, output(lease))
            assert ack.status.code == 0, ack.status
        else:
            await runtime.submit(lease, output(lease))
        finished += 1
        if finished == jobs:
            done.set()

    started = time.perf_counter()
    async with working(runtimes, finish):
        await asyncio.wait_for(done.wait(), timeout=600)
        return jobs / (time.perf_counter() - started)


@dataclass(frozen=True)
class ChunkPairs:
    #: Medians over the pairs: the drain without chunks, with one, and their ratio per pair.
    plain: float
    chunks: float
    ratio: float


async def chunk_pairs(url: str, jobs: int) -> ChunkPairs:
    """The drain with an output chunk per job against the drain without, in adjacent pairs on
    one scheduler and database (each drain after its own bulk create), the order alternating
    from pair to pair: the host's speed swings by more than the difference being measured."""
    plain: list[float] = []
    chunked: list[float] = []
    with scheduler_processes(url, 1) as addresses:
        channels = [grpc.aio.insecure_channel(address) for address in addresses]
        try:
            for index in range(PAIRS):
                for chunks in (False, True) if index % 2 == 0 else (True, False):
                    await _create_bulk(channels[0], jobs, streaming=True)
                    rate = await _drain(
                        channels, jobs, RUNTIMES, SLOTS, True, chunks=chunks, streaming=True
                    )
                    (chunked if chunks else plain).append(rate)
        finally:
            for channel in channels:
                await channel.close(None)
    ratios = [c / p for c, p in zip(chunked, plain, strict=True)]
    return ChunkPairs(
        statistics.median(plain), statistics.median(chunked), statistics.median(ratios)
    )


async def _create_bulk(channel: grpc.aio.Channel, jobs: int, *, streaming: bool = False) -> None:
    client = JobClient(channel, "bench-bulk")
    job_type = STREAMING_TYPE if streaming else "synthetic_echo"
    for start in range(0, jobs, 100):
        items = []
        for index in range(start, min(start + 100, jobs)):
            job = job_pb.CreateJobRequest(job_type=job_type, idempotency_key=uuid.uuid4().hex)
            snapshot = {**STREAMING_SNAPSHOT, "i": index} if streaming else {"i": index}
            json_format.ParseDict(snapshot, job.snapshot)
            items.append(job_pb.CreateJobsItem(user_id=f"bench-{index % 64}", job=job))
        reply = await client.stub.CreateJobs(
            job_pb.CreateJobsRequest(items=items), metadata=client.metadata, timeout=120
        )
        assert all(result.status.code == 0 for result in reply.results)


def _cpu_figures(ours: Drain) -> dict[str, float]:
    """Where a drained job's CPU goes, and the rate the cores would allow at that cost: all
    cores divided by the three sides' CPU per job (only when the database server is local)."""
    cpu = ours.cpu_us_per_job
    figures = {
        "ours_drain_scheduler_cpu_us_per_job": cpu.scheduler,
        "ours_drain_runtimes_cpu_us_per_job": cpu.runtimes,
    }
    if cpu.database is not None:
        whole = cpu.scheduler + cpu.database + cpu.runtimes
        cores = psutil.cpu_count() or 1
        figures["ours_drain_mariadb_cpu_us_per_job"] = cpu.database
        figures["ours_drain_cpu_us_per_job"] = whole
        figures["ours_drain_cpu_bound_jobs_per_s"] = cores * 1e6 / whole
        figures["ours_drain_cores_busy"] = ours.drain_jobs_per_s * whole / (cores * 1e6)
    return figures


async def main(jobs: int = JOBS) -> dict[str, float]:
    async with throwaway_database() as url:
        ceiling_rate = await ceiling(url, jobs)
    async with throwaway_database() as url:
        batched = await batched_ceiling(url, jobs)
    async with throwaway_database() as url:
        ours = await drain(url, jobs, stream=True)
    async with throwaway_database() as url:
        unary = await drain(url, jobs, stream=False)
    async with throwaway_database() as url:
        paired = await chunk_pairs(url, jobs)
    print(f"\nthroughput, {jobs} synthetic_echo jobs, MariaDB, 1 scheduler, {RUNTIMES}x{SLOTS}\n")
    print(f"{'ceiling (3 commits/job, 20 connections)':44} {ceiling_rate:10.0f} jobs/s")
    print(f"{'batched ceiling (50 jobs/transaction)':44} {batched.jobs_per_s:10.0f} jobs/s")
    print(f"{'  its CPU (loop and database)':44} {batched.cpu_us_per_job:10.0f} us/job")
    print(f"{'ours: CreateJob, 32 callers':44} {ours.create_jobs_per_s:10.0f} jobs/s")
    print(f"{'ours: drain, reports on the stream':44} {ours.drain_jobs_per_s:10.0f} jobs/s")
    cpu = ours.cpu_us_per_job
    print(f"{'  CPU: the scheduler':44} {cpu.scheduler:10.0f} us/job")
    print(f"{'  CPU: MariaDB':44} {cpu.database or float('nan'):10.0f} us/job")
    print(f"{'  CPU: the benchmark runtimes':44} {cpu.runtimes:10.0f} us/job")
    print(f"{'ours: drain, unary SubmitResult':44} {unary.drain_jobs_per_s:10.0f} jobs/s")
    print(f"{'ours: drain, paired runs without chunks':44} {paired.plain:10.0f} jobs/s")
    print(f"{'ours: drain, paired runs, a chunk per job':44} {paired.chunks:10.0f} jobs/s")
    print(f"{'  with chunks / without (median of pairs)':44} {paired.ratio:10.2f}")
    return {
        "jobs": float(jobs),
        "ceiling_jobs_per_s": ceiling_rate,
        "batched_ceiling_jobs_per_s": batched.jobs_per_s,
        "batched_ceiling_cpu_us_per_job": batched.cpu_us_per_job,
        "ours_create_jobs_per_s": ours.create_jobs_per_s,
        "ours_jobs_per_s": ours.drain_jobs_per_s,
        **_cpu_figures(ours),
        "ours_unary_jobs_per_s": unary.drain_jobs_per_s,
        "ours_jobs_per_s_paired_plain": paired.plain,
        "ours_jobs_per_s_with_chunks": paired.chunks,
        "chunks_drain_vs_plain": paired.ratio,
    }


if __name__ == "__main__":
    asyncio.run(main())

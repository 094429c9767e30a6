"""Partial outputs: what StreamOutput callers cost the database, and what a resumed
attempt saves.

* **stream_output_db_statements_per_s** — 20 ``quiz_generation`` jobs held by a runtime on one
  scheduler process, writing a chunk each every 250 ms; 200 StreamOutput callers (10 per job) on
  a second process, which sees the chunks only through the database. The figure is the database
  statements per second with the callers minus the same window without them: what the callers
  cost (``Questions``: the pool's rollback after each read counts too). Its reads
  (``Com_select``) divided by the jobs and the output hub's rounds per second are
  ``stream_output_reads_per_job_wakeup``: the bound is one read per job per wake-up, plus the
  round's one state statement shared by all the jobs.
* **resume_completion_tokens_ratio** — a runtime process SIGKILLed mid-generation and the next
  attempt (devtools/harness/resume.py): completion tokens over both calls / one unbroken call
  (about 1.5 to 2 without resume).

    python -m bench.outputs     # AIJOB_BENCH_OUTPUT_WINDOW_S (10)
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import grpc

from bench.databases import throwaway_database
from bench.inflight import _connect, _scalar
from bench.sizes import size, span_s
from devtools.harness.procs import runtime_processes, spawn_schedulers
from devtools.harness.resume import SNAPSHOT, kill_mid_generation
from devtools.harness.runtime_client import ClientRuntime, JobClient
from devtools.scripted_model import ScriptedModelServer

JOBS, CALLERS_PER_JOB = size("OUTPUT_JOBS", 20, 4), 10
WINDOW_S = span_s("OUTPUT_WINDOW_S", 10, 1)
#: How long the killed job's model call takes to write its answer, and the chunks read first.
DRIP_MS = size("RESUME_DRIP_MS", 6_000, 1_500)
KILL_AFTER = size("RESUME_KILL_AFTER", 6, 3)
CHUNK_EVERY_S = 0.25
#: The output hub's round (the scheduler's AIJOB_WATCH_POLL_MS default).
HUB_ROUND_S = 0.25
SHORT_LEASES = {
    "AIJOB_LEASE_TTL_S": "2",
    "AIJOB_LEASE_GRACE_S": "0.5",
    "AIJOB_REAPER_INTERVAL_S": "0.2",
}


async def main() -> dict[str, float]:
    figures = await _stream_output()
    figures |= await _resume()
    print(f"\npartial outputs ({JOBS} jobs, {JOBS * CALLERS_PER_JOB} StreamOutput callers)\n")
    for key, value in figures.items():
        print(f"{key:44} {value:10.2f}")
    return figures


async def _stream_output() -> dict[str, float]:
    async with throwaway_database() as url:
        conn = await _connect(url)
        try:
            # No slow start for the model key: the 20 jobs are all leased at once.
            unlimited = {"AIJOB_MODEL_INITIAL_CONCURRENCY": "0"}
            with spawn_schedulers(url, 2, env=unlimited) as (writer, reader):
                near = grpc.aio.insecure_channel(writer.address)
                far = grpc.aio.insecure_channel(reader.address)
                try:
                    return await _measure(conn, near, far)
                finally:
                    await near.close(None)
                    await far.close(None)
        finally:
            conn.close()


async def _measure(conn: Any, near: grpc.aio.Channel, far: grpc.aio.Channel) -> dict[str, float]:
    # A user per job: one user's running jobs are capped per model key (8 by default).
    users = {}
    for index in range(JOBS):
        job = await JobClient(near, f"bench-output-{index}").create(
            "quiz_generation", snapshot=SNAPSHOT
        )
        users[job.job_id] = job.user_id
    runtime = ClientRuntime(near, "bench-rt-output", job_types=["quiz_generation"], slots=JOBS)
    await runtime.connect()
    runtime.credit(JOBS)
    leases = [await runtime.next_lease() for _ in range(JOBS)]
    writing = asyncio.ensure_future(_write_chunks(runtime, leases))
    try:
        alone = await _per_s(conn)
        callers = [
            JobClient(far, users[lease.job_id]).stream_output(lease.job_id)
            for lease in leases
            for _ in range(CALLERS_PER_JOB)
        ]
        for call in callers:
            await call.read()  # every caller connected and reading before the window opens
        reading = [asyncio.ensure_future(_drain(call)) for call in callers]
        try:
            with_callers = await _per_s(conn)
        finally:
            for call in callers:
                call.cancel()
            await asyncio.gather(*reading, return_exceptions=True)
    finally:
        writing.cancel()
        await asyncio.gather(writing, return_exceptions=True)
        await runtime.close()
    statements = max(0.0, with_callers[0] - alone[0])
    reads = max(0.0, with_callers[1] - alone[1])
    return {
        "stream_output_callers": float(len(callers)),
        "stream_output_db_statements_per_s": statements,
        "stream_output_db_reads_per_s": reads,
        "stream_output_reads_per_job_wakeup": reads / (JOBS / HUB_ROUND_S),
    }


async def _write_chunks(runtime: ClientRuntime, leases: list[Any]) -> None:
    offset = 0
    while True:
        await asyncio.gather(*(runtime.send_chunk(lease, offset, "0123456789") for lease in leases))
        offset += 10
        await asyncio.sleep(CHUNK_EVERY_S)  # the model's pace: a chunk per job per 250 ms


async def _drain(call: Any) -> None:
    async for _ in call:
        pass


async def _per_s(conn: Any) -> tuple[float, float]:
    """The database's statements per second over the window (``Questions``: every statement,
    the connection pool's rollbacks included) and its SELECTs per second (``Com_select``)."""
    questions = "SHOW GLOBAL STATUS LIKE 'Questions'"
    selects = "SHOW GLOBAL STATUS LIKE 'Com_select'"
    before = (await _scalar(conn, questions), await _scalar(conn, selects))
    await asyncio.sleep(WINDOW_S)  # the window being measured
    after = (await _scalar(conn, questions), await _scalar(conn, selects))
    # Our own four SHOW statements are not the scheduler's.
    return (after[0] - before[0] - 4) / WINDOW_S, (after[1] - before[1]) / WINDOW_S


async def _resume() -> dict[str, float]:
    model = ScriptedModelServer()
    model.start_in_thread()
    try:
        async with throwaway_database() as url:
            with (
                spawn_schedulers(url, 1, env=SHORT_LEASES) as (scheduler,),
                runtime_processes(model.base_url, AIJOB_OUTPUT_CHUNK_MS="50") as start,
            ):
                channel = grpc.aio.insecure_channel(scheduler.address)
                try:
                    run = await kill_mid_generation(
                        channel,
                        functools.partial(start, scheduler.address),
                        model.state.stats,
                        drip_ms=DRIP_MS,
                        kill_after_chunks=KILL_AFTER,
                    )
                finally:
                    await channel.close(None)
    finally:
        model.shutdown()
        model.server_close()
    return {
        "resume_completion_tokens_ratio": run.ratio,
        "resume_chunks_before_kill": float(run.chunks_before_kill),
    }


if __name__ == "__main__":
    asyncio.run(main())

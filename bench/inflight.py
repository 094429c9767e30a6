"""In-flight leases: 10,000 leases held by 100 runtimes on Poll streams for 60 s, on jobs that never
finish, with leases short enough (10 s) that only the streams keep them alive.

Reported: the leases held, the scheduler's CPU over the window, the database's statements per
second over the window (its ``Questions`` counter, the benchmark's own reads subtracted), and
spurious reaps (jobs taken back although their runtime's stream kept speaking). The same is run
with a tenth of the leases, to show that the statements do not grow with the leases held.

    python -m bench.inflight      # AIJOB_BENCH_INFLIGHT (10000), AIJOB_BENCH_INFLIGHT_S (60)
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncmy
import grpc
import psutil
from sqlalchemy.engine import make_url

from bench.databases import throwaway_database
from bench.sizes import size, span_s
from devtools.harness.procs import spawn_schedulers
from devtools.harness.runtime_client import ClientRuntime

INFLIGHT = size("INFLIGHT", 10_000, 200)
WINDOW_S = span_s("INFLIGHT_S", 60, 2)
RUNTIMES = 100
KEEPALIVE_S = 3.0
LEASE_ENV = {
    "AIJOB_LEASE_TTL_S": "10",
    "AIJOB_LEASE_GRACE_S": "5",
    "AIJOB_STREAM_ALIVE_S": "15",
    # These jobs never finish, so a model key's slow start (4 calls, growing only on answers)
    # would lease four of them and wait for ever, and DeepSeek's account concurrency (2,500
    # Flash) would stop the phase at a quarter: this measures held leases, not flow control.
    "AIJOB_MODEL_INITIAL_CONCURRENCY": "0",
    "AIJOB_MODEL_ACCOUNT_CONCURRENCY": "off",
}
#: Leasing that makes no progress for this long ends the phase with an error, not a hang.
STALL_S = 60.0


async def _connect(url: str) -> Any:
    parsed = make_url(url)
    return await asyncmy.connect(
        host=parsed.host,
        port=parsed.port or 3306,
        user=parsed.username,
        password=parsed.password or "",
        db=parsed.database,
        autocommit=True,
    )


async def _insert_jobs(conn: Any, count: int) -> None:
    """Queued synthetic_echo jobs written straight into the table (creating 10,000 through
    CreateJob would measure CreateJob)."""
    async with conn.cursor() as cur:
        for start in range(0, count, 500):
            ids = [str(uuid.uuid4()) for _ in range(min(500, count - start))]
            rows = ", ".join(
                "(%s, 'bench', 'synthetic_echo', 'pending', 0, 'ai-interactive', 'queued',"
                " 50, 0, 3, 600000, 'v1',"
                " UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))"
                for _ in ids
            )
            await cur.execute(
                "INSERT INTO AiAnalysisJob (id, userId, jobType, status, progress, queueName,"
                " lifecycleStatus, priority, attemptCount, maxAttempts, timeoutMs, promptVersion,"
                " availableAt,"
                f" queuedAt, createdAt, updatedAt) VALUES {rows}",
                ids,
            )


async def _scalar(conn: Any, query: str) -> int:
    async with conn.cursor() as cur:
        await cur.execute(query)
        row = await cur.fetchone()
    return int(row[-1])


async def main() -> dict[str, float]:
    figures = await _run(INFLIGHT)
    small = await _run(INFLIGHT // 10)
    figures["inflight_small_leases"] = small["inflight_leases"]
    figures["inflight_small_db_statements_per_s"] = small["inflight_db_statements_per_s"]
    print(f"\nin-flight leases on {RUNTIMES} streams, {WINDOW_S:.0f} s each\n")
    print(f"{'leases held':40} {figures['inflight_leases']:10.0f}")
    print(f"{'scheduler CPU':40} {figures['inflight_scheduler_cpu_percent']:10.1f} % of a core")
    print(f"{'database statements/s':40} {figures['inflight_db_statements_per_s']:10.1f}")
    print(f"{'spurious reaps':40} {figures['inflight_spurious_reaps']:10.0f}")
    tenth = small["inflight_db_statements_per_s"]
    print(f"{'statements/s with a tenth of the leases':40} {tenth:10.1f}")
    return figures


async def _run(count: int) -> dict[str, float]:
    async with throwaway_database() as url:
        conn = await _connect(url)
        try:
            await _insert_jobs(conn, count)
            with spawn_schedulers(url, 1, env=LEASE_ENV) as (scheduler,):
                process = psutil.Process(scheduler.process.pid)
                return await _hold(conn, scheduler.address, process, count)
        finally:
            conn.close()


async def _hold(conn: Any, address: str, process: psutil.Process, count: int) -> dict[str, float]:
    channel = grpc.aio.insecure_channel(address)
    slots = -(-count // RUNTIMES)
    runtimes = [ClientRuntime(channel, f"held-{i}", slots=slots) for i in range(RUNTIMES)]
    running = "SELECT COUNT(*) FROM AiAnalysisJob WHERE lifecycleStatus = 'running'"
    try:
        for runtime in runtimes:
            await runtime.connect()
        leased, still_since = 0, asyncio.get_running_loop().time()
        while (now_leased := await _scalar(conn, running)) < count:
            now = asyncio.get_running_loop().time()
            if now_leased > leased:
                leased, still_since = now_leased, now
            elif now - still_since > STALL_S:
                raise RuntimeError(f"leasing stalled at {leased} of {count} jobs")
            for runtime in runtimes:
                runtime.keepalive()
            await asyncio.sleep(1)  # leasing 10,000 jobs takes a few rounds; poll the count
        questions = "SHOW GLOBAL STATUS LIKE 'Questions'"
        before = await _scalar(conn, questions)
        process.cpu_percent(None)
        for _ in range(int(WINDOW_S / KEEPALIVE_S)):
            for runtime in runtimes:
                runtime.keepalive()
            await asyncio.sleep(KEEPALIVE_S)  # the runtimes' keepalive period
        cpu = process.cpu_percent(None)
        # Our own two reads (the SHOW before and after) are not the scheduler's.
        statements = (await _scalar(conn, questions) - before - 2) / WINDOW_S
        held = await _scalar(conn, running)
        reaped = await _scalar(
            conn,
            "SELECT COUNT(*) FROM AiAnalysisJob"
            " WHERE attemptCount > 1 OR lifecycleStatus <> 'running'",
        )
    finally:
        for runtime in runtimes:
            await runtime.close()
        await channel.close(None)
    return {
        "inflight_leases": float(held),
        "inflight_scheduler_cpu_percent": cpu,
        "inflight_db_statements_per_s": statements,
        "inflight_spurious_reaps": float(reaped),
    }


if __name__ == "__main__":
    asyncio.run(main())

"""The throttle storm: LLM jobs from several users against a rate-limited model.

300 ``synthetic_echo`` jobs — 250 from one user created first, then 25 each from two others —
run by 3 real runtime processes x 16 slots against the scripted model limited to 120 requests a
minute and 8 concurrent calls per API key (each call taking ``AIJOB_BENCH_LLM_LATENCY_MS``), with
the model key's limits set as an operator would (``PutModelLimit``: 8 at once, 120 a minute): the
per-minute limit binds for two minutes.

    python -m bench.llm_storm

Figures: ``llm_jobs``, ``llm_failed``, ``llm_rate_limited_share`` (429s / model calls),
``llm_makespan_vs_ideal`` (wall time from the first create to the last job's end, over the
fastest the limits allow: ``ideal_makespan_s``), ``llm_small_users_wait_p95_s`` (create → lease
of the two small users' jobs, by the database clock).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from google.protobuf import json_format
from sqlalchemy import Table, func, select

from bench.databases import throwaway_database
from bench.sizes import size
from devtools.harness import tokens
from devtools.harness.procs import spawn_schedulers
from devtools.harness.runtime_client import JobClient
from devtools.scripted_limits import KeyLimits
from devtools.scripted_model import ScriptedModelServer
from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.db.models import AiJob
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc
from shared.gen.aijob.v1 import job_service_pb2 as job_pb

#: 120 a minute for 300 jobs: the per-minute limit binds for two minutes (600 a minute let the
#: whole storm through inside the first minute's budget, so nothing was ever throttled).
RPM, CONCURRENCY = size("LLM_RPM", 120, 600), 8
BIG, SMALL = size("LLM_BIG", 250, 20), size("LLM_SMALL", 25, 4)
RUNTIMES, SLOTS = 3, 16
LATENCY_MS = size("LLM_LATENCY_MS", 200, 20)
PLATFORM_KEY = "sk-bench-platform-key-0001"
_jobs = cast(Table, AiJob.__table__)


@contextmanager
def runtimes(address: str, base_url: str, logs: Path, **env: str) -> Iterator[None]:
    """RUNTIMES runtime processes of SLOTS slots on ``address``, calling ``base_url`` (``env``
    on top of theirs)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "runtime_service"],
            env={
                **os.environ,
                **env,
                "AIJOB_SCHEDULER_ADDR": address,
                "AIJOB_RUNTIME_TOKEN": tokens.RUNTIME_TOKEN,
                "AIJOB_RUNTIME_INSTANCE_ID": f"storm-{n}",
                "AIJOB_RUNTIME_SLOTS": str(SLOTS),
                "AIJOB_MODEL_BASE_URL": base_url,
                "DEEPSEEK_API_KEY": PLATFORM_KEY,
                "AIJOB_METRICS_LISTEN": "",
            },
            stderr=(logs / f"runtime-{n}.log").open("wb"),
        )
        for n in range(RUNTIMES)
    ]
    try:
        yield
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=60)


async def create_jobs(client: JobClient, users: list[str]) -> None:
    items = []
    for n, user in enumerate(users):
        job = job_pb.CreateJobRequest(job_type="synthetic_echo")
        json_format.ParseDict({"text": f"storm {n}"}, job.snapshot)
        items.append(job_pb.CreateJobsItem(user_id=user, job=job))
    reply = await client.stub.CreateJobs(
        job_pb.CreateJobsRequest(items=items), metadata=client.metadata, timeout=120
    )
    refused = [r.status.message for r in reply.results if r.status.code != 0]
    assert not refused, refused[:3]


async def _storm(url: str, address: str, server: ScriptedModelServer) -> dict[str, float]:
    channel = tokens.channel(address)
    admin = admin_service_pb2_grpc.AdminServiceStub(channel)
    limit = admin_pb.ModelLimit(
        provider="deepseek",
        model="deepseek-chat",
        credential_scope="platform",
        max_concurrency=CONCURRENCY,
        requests_per_minute=RPM,
    )
    await admin.PutModelLimit(
        admin_pb.PutModelLimitRequest(limit=limit),
        metadata=tokens.bearer(tokens.ADMIN_TOKEN),
        timeout=30,
    )
    client = JobClient(channel, "storm-caller")
    started = time.perf_counter()
    await create_jobs(client, ["nightly-batch"] * BIG)
    await create_jobs(client, ["learner-a"] * SMALL + ["learner-b"] * SMALL)
    engine = create_engine(url, pool_size=2)
    try:
        ended = await finished(engine, BIG + 2 * SMALL)
        makespan = ended - started
        async with engine.connect() as conn:
            failed = (
                await conn.execute(
                    select(func.count()).where(_jobs.c.lifecycleStatus != "succeeded")
                )
            ).scalar_one()
            waits = [
                (row.startedAt - row.createdAt).total_seconds()
                for row in await conn.execute(
                    select(_jobs.c.startedAt, _jobs.c.createdAt).where(
                        _jobs.c.userId.in_(["learner-a", "learner-b"])
                    )
                )
            ]
    finally:
        await engine.dispose()
        await channel.close(None)
    stats = server.state.stats()
    calls = max(1, int(stats["requests"]))
    ideal = ideal_makespan_s(BIG + 2 * SMALL, RPM, CONCURRENCY, LATENCY_MS / 1000)
    return {
        "llm_jobs": float(BIG + 2 * SMALL),
        "llm_failed": float(failed),
        "llm_rate_limited_share": stats["rate_limited"] / calls,
        "llm_makespan_s": makespan,
        "llm_makespan_vs_ideal": makespan / ideal,
        "llm_small_users_wait_p95_s": statistics.quantiles(waits, n=20)[-1],
        "llm_model_max_concurrent": float(stats["max_concurrent"]),
    }


def ideal_makespan_s(jobs: int, rpm: int, concurrency: int, call_s: float) -> float:
    """The fastest the model's limits let ``jobs`` calls finish: each starts as early as both a
    free place (``concurrency`` at once, ``call_s`` each) and the sliding minute (``rpm`` starts
    in any 60 s) allow — a minute's burst, then the rate."""
    starts: list[float] = []
    ends: list[float] = []
    for n in range(jobs):
        at = 0.0
        if n >= rpm:
            at = max(at, starts[n - rpm] + 60.0)
        if n >= concurrency:
            at = max(at, sorted(ends)[n - concurrency])
        starts.append(at)
        ends.append(at + call_s)
    return max(ends, default=0.0)


async def finished(engine: Any, total: int) -> float:
    """When the last of ``total`` jobs reached a terminal state (polled: the bench's own loop)."""
    terminal = ("succeeded", "failed", "cancelled")
    query = select(func.count()).where(_jobs.c.lifecycleStatus.in_(terminal))
    deadline = time.perf_counter() + 600
    while time.perf_counter() < deadline:
        async with engine.connect() as conn:
            if (await conn.execute(query)).scalar_one() >= total:
                return time.perf_counter()
        await asyncio.sleep(0.05)
    raise TimeoutError("the storm did not finish in 10 minutes")


#: A storm: (database URL, scheduler address, scripted model) -> its figures.
Storm = Callable[[str, str, ScriptedModelServer], Awaitable[dict[str, float]]]


async def run_storm(server: ScriptedModelServer, storm: Storm, title: str) -> dict[str, float]:
    """``storm`` against ``server`` (started here) with a throwaway database, one scheduler and
    the runtime processes; its figures printed under ``title``."""
    server.start_in_thread()
    try:
        async with throwaway_database() as url:
            with (
                tempfile.TemporaryDirectory() as logs,
                spawn_schedulers(url, 1, env={"AIJOB_MAX_ACTIVE_JOBS_PER_USER": "1000"}) as (
                    scheduler,
                ),
                runtimes(scheduler.address, server.base_url, Path(logs)),
            ):
                figures = await storm(url, scheduler.address, server)
    finally:
        server.shutdown()
        server.server_close()
    print(f"\n{title}\n")
    for name, value in figures.items():
        print(f"{name:44} {value:10.3f}")
    return figures


async def main() -> dict[str, float]:
    server = ScriptedModelServer(
        fault=f"latency:{LATENCY_MS}", limits=KeyLimits(rpm=RPM, concurrency=CONCURRENCY)
    )
    title = (
        f"throttle storm: {BIG} + 2 x {SMALL} jobs, {RUNTIMES} runtimes x {SLOTS} slots, model "
        f"{RPM}/min and {CONCURRENCY} at once, {LATENCY_MS} ms a call"
    )
    return await run_storm(server, _storm, title)


if __name__ == "__main__":
    asyncio.run(main())

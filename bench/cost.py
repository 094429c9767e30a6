"""Jobs that wait for the cheap hours: what the background analyses cost.

600 jobs — half interactive (``synthetic_echo``, immediate), half background
(``weak_point_analysis``, off-peak by its type's default) — created over the first half of a peak
window that the bench sets (through ``AIJOB_PEAK_HOURS``) to begin as the scheduler starts and to
last one minute, run by 3 runtime processes x 16 slots against the scripted model (200 ms a
call). Run twice, each on a fresh database and model: as created, and with every job immediate.

    python -m bench.cost          (make bench-cost; also a phase of make bench)

Figures: ``cost_off_peak_vs_immediate`` (what the background jobs cost in the first run over what
they cost in the second; DeepSeek's off-peak rate is half its peak rate, so 0.5 is the floor),
``cost_deadline_misses`` (background jobs failed JOB_EXPIRED), ``cost_interactive_wait_p95_ratio``
(interactive create -> lease p95, first run over second), and the figures each is made of.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

from google.protobuf import json_format
from sqlalchemy import Table, func, select

from bench.databases import throwaway_database
from bench.llm_storm import finished, runtimes
from bench.sizes import size, span_s
from devtools.harness import tokens
from devtools.harness.procs import spawn_schedulers
from devtools.harness.runtime_client import JobClient
from devtools.scripted_model import ScriptedModelServer
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.db.models import AiJob, AiUsageLog
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import types_pb2

JOBS = size("COST_JOBS", 600, 40)
WINDOW_S = span_s("COST_WINDOW_S", 60.0, 4.0)
LATENCY_MS = size("COST_LATENCY_MS", 200, 20)
BATCHES = 10
BACKGROUND, INTERACTIVE = "weak_point_analysis", "synthetic_echo"
SNAPSHOT = {
    "learner": {"id": "learner-1"},
    "knowledgePoints": [{"id": "kp-1", "name": "Mitochondria", "mastery": 0.2}],
    "answers": [{"questionId": "q1", "knowledgePointId": "kp-1", "correct": False}],
}
_jobs = cast(Table, AiJob.__table__)
_usage = cast(Table, AiUsageLog.__table__)


def window_spec(starts: datetime, length_s: float) -> str:
    """``AIJOB_PEAK_HOURS`` for one window from ``starts`` (UTC) lasting ``length_s``."""
    ends = starts + timedelta(seconds=length_s)
    day = starts.strftime("%a").lower()
    return f"{day} {starts:%H:%M:%S}-{ends:%H:%M:%S} @UTC"


async def _database_now(url: str) -> datetime:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            now: datetime = (await conn.execute(select(db_now()))).scalar_one()
            return now
    finally:
        await engine.dispose()


def _item(n: int, all_immediate: bool) -> job_pb.CreateJobsItem:
    background = n % 2 == 1
    job = job_pb.CreateJobRequest(job_type=BACKGROUND if background else INTERACTIVE)
    json_format.ParseDict(SNAPSHOT if background else {"text": f"cost {n}"}, job.snapshot)
    if all_immediate or not background:
        job.cost_policy = types_pb2.COST_POLICY_IMMEDIATE
    user = f"{'bg' if background else 'ia'}-user-{n % 8}"
    return job_pb.CreateJobsItem(user_id=user, job=job)


async def _create_over(client: JobClient, seconds: float, all_immediate: bool) -> None:
    """The jobs, in ``BATCHES`` calls spread over ``seconds``."""
    per_batch = max(1, JOBS // BATCHES)
    started = time.perf_counter()
    for batch in range(BATCHES):
        items = [
            _item(n, all_immediate)
            for n in range(batch * per_batch, min(JOBS, (batch + 1) * per_batch))
        ]
        if items:
            reply = await client.stub.CreateJobs(
                job_pb.CreateJobsRequest(items=items), metadata=client.metadata, timeout=120
            )
            refused = [r.status.message for r in reply.results if r.status.code != 0]
            assert not refused, refused[:3]
        pause = started + seconds * (batch + 1) / BATCHES - time.perf_counter()
        if pause > 0:
            await asyncio.sleep(pause)


async def _figures(url: str) -> dict[str, float]:
    engine = create_engine(url, pool_size=2)
    try:
        await finished(engine, JOBS)
        async with engine.connect() as conn:
            cost = (
                await conn.execute(
                    select(func.coalesce(func.sum(_usage.c.costMicros), 0)).where(
                        _usage.c.jobType == BACKGROUND
                    )
                )
            ).scalar_one()
            misses = (
                await conn.execute(
                    select(func.count()).where(
                        _jobs.c.jobType == BACKGROUND, _jobs.c.errorCode == "JOB_EXPIRED"
                    )
                )
            ).scalar_one()
            failed = (
                await conn.execute(
                    select(func.count()).where(_jobs.c.lifecycleStatus != "succeeded")
                )
            ).scalar_one()
            waits = [
                (row.lockedAt - row.createdAt).total_seconds()
                for row in await conn.execute(
                    select(_jobs.c.lockedAt, _jobs.c.createdAt).where(
                        _jobs.c.jobType == INTERACTIVE
                    )
                )
            ]
    finally:
        await engine.dispose()
    return {
        "background_cost_micros": float(cost),
        "deadline_misses": float(misses),
        "failed": float(failed),
        "interactive_wait_p95_s": statistics.quantiles(waits, n=20)[-1],
    }


async def _run(all_immediate: bool) -> dict[str, float]:
    server = ScriptedModelServer(fault=f"latency:{LATENCY_MS}")
    server.start_in_thread()
    try:
        async with throwaway_database() as url:
            # The window begins now (by the database's clock) and lasts WINDOW_S; a window does
            # not cross midnight, so a run that would starts just after it.
            starts = await _database_now(url)
            if starts.date() != (starts + timedelta(seconds=WINDOW_S + 30)).date():
                await asyncio.sleep(WINDOW_S + 31)
                starts = await _database_now(url)
            env = {
                "AIJOB_MAX_ACTIVE_JOBS_PER_USER": "1000",
                "AIJOB_PEAK_HOURS": window_spec(starts, WINDOW_S),
                "AIJOB_REAPER_INTERVAL_S": "0.5",
            }
            with (
                tempfile.TemporaryDirectory() as logs,
                spawn_schedulers(url, 1, env=env) as (scheduler,),
                runtimes(scheduler.address, server.base_url, Path(logs)),
            ):
                channel = tokens.channel(scheduler.address)
                try:
                    await _create_over(
                        JobClient(channel, "cost-caller"), WINDOW_S / 2, all_immediate
                    )
                finally:
                    await channel.close(None)
                return await _figures(url)
    finally:
        server.shutdown()
        server.server_close()


async def main() -> dict[str, Any]:
    as_created = await _run(all_immediate=False)
    immediate = await _run(all_immediate=True)
    figures = {
        "cost_jobs": float(JOBS),
        "cost_window_s": WINDOW_S,
        "cost_failed": as_created["failed"] + immediate["failed"],
        "cost_background_off_peak_micros": as_created["background_cost_micros"],
        "cost_background_immediate_micros": immediate["background_cost_micros"],
        "cost_off_peak_vs_immediate": as_created["background_cost_micros"]
        / max(1.0, immediate["background_cost_micros"]),
        "cost_deadline_misses": as_created["deadline_misses"],
        "cost_interactive_wait_p95_s": as_created["interactive_wait_p95_s"],
        "cost_interactive_wait_p95_immediate_s": immediate["interactive_wait_p95_s"],
        "cost_interactive_wait_p95_ratio": as_created["interactive_wait_p95_s"]
        / max(1e-3, immediate["interactive_wait_p95_s"]),
    }
    print(f"\ncost: {JOBS} jobs across a {WINDOW_S:.0f} s peak window, {LATENCY_MS} ms a call\n")
    for name, value in figures.items():
        print(f"{name:44} {value:12.3f}")
    return figures


if __name__ == "__main__":
    asyncio.run(main())

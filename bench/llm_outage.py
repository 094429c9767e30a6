"""The outage storm: the primary model of a job type's route answers 503 for a span in the middle
of a drain, and a second provider stands behind it as the fallback tier.

``JOBS`` ``synthetic_echo`` jobs run on 3 real runtime processes x 16 slots; the job type's
route is ``deepseek/deepseek-v4-pro`` then ``backup/backup-flash`` (a second scripted server,
configured on the runtimes by ``AIJOB_PROVIDER_BACKUP_*``), each call taking
``AIJOB_BENCH_LLM_OUTAGE_LATENCY_MS``. The drain runs twice on fresh databases: clean, and with
the primary answering 503 to every call for ``OUTAGE_S`` seconds from ``OUTAGE_AT_S`` after the
first create (the bench's own clock). The breakers open after 5 failures in a row and probe after
a 5 s cool-down.

    python -m bench.llm_outage

Figures: ``outage_jobs``, ``outage_failed`` (goal 0), ``outage_makespan_vs_clean`` (wall time from
the first create to the last job's end, over the clean run's; goal <= 1.3),
``outage_attempts_spent`` (attempts the outage cost the jobs: those it did not waive),
``outage_primary_failed_calls`` (calls the outage answered), ``outage_fallback_jobs`` (jobs the
fallback answered), ``outage_clean_makespan_s``, ``outage_makespan_s``.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import cast

from google.protobuf import json_format
from sqlalchemy import Table, func, select

from bench.databases import throwaway_database
from bench.llm_storm import PLATFORM_KEY, finished, runtimes
from bench.sizes import size, span_s
from devtools.harness import tokens
from devtools.harness.procs import spawn_schedulers
from devtools.harness.runtime_client import JobClient
from devtools.scripted_model import ScriptedModelServer
from scheduler_service.core.prices import DEFAULT_PRICES
from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.db.models import AiJob
from shared.gen.aijob.v1 import job_service_pb2 as job_pb

JOBS = size("LLM_OUTAGE_JOBS", 600, 30)
LATENCY_MS = size("LLM_OUTAGE_LATENCY_MS", 2000, 50)
OUTAGE_AT_S = span_s("LLM_OUTAGE_AT_S", 8.0, 0.2)
OUTAGE_S = span_s("LLM_OUTAGE_S", 20.0, 1.0)
PRIMARY, FALLBACK = "deepseek-v4-pro", "backup-flash"
#: At most this many creates in one CreateJobs call.
CREATE_BATCH = 200
_jobs = cast(Table, AiJob.__table__)

SCHEDULER_ENV = {
    "AIJOB_MAX_ACTIVE_JOBS_PER_USER": str(JOBS),
    "AIJOB_MODEL_ROUTES": f"synthetic_echo=deepseek/{PRIMARY},backup/{FALLBACK}",
    "AIJOB_BREAKER_FAILURES": "5",
    "AIJOB_BREAKER_COOL_DOWN_S": "5",
    "AIJOB_MODEL_PRICES": f"{DEFAULT_PRICES},{FALLBACK}=300000/30000/600000",
}


async def _create(client: JobClient) -> None:
    for first in range(0, JOBS, CREATE_BATCH):
        items = []
        for n in range(first, min(first + CREATE_BATCH, JOBS)):
            job = job_pb.CreateJobRequest(job_type="synthetic_echo")
            json_format.ParseDict({"text": f"outage {n}"}, job.snapshot)
            items.append(job_pb.CreateJobsItem(job=job))
        reply = await client.stub.CreateJobs(
            job_pb.CreateJobsRequest(items=items), metadata=client.metadata, timeout=120
        )
        refused = [r.status.message for r in reply.results if r.status.code != 0]
        assert not refused, refused[:3]


async def _strike(primary: ScriptedModelServer) -> None:
    await asyncio.sleep(OUTAGE_AT_S)
    primary.state.outages.start(PRIMARY, "503", OUTAGE_S)


async def _drain(url: str, address: str, primary: ScriptedModelServer, outage: bool) -> float:
    channel = tokens.channel(address)
    client = JobClient(channel, "outage-caller")
    started = time.perf_counter()
    strike = asyncio.ensure_future(_strike(primary)) if outage else None
    await _create(client)
    engine = create_engine(url, pool_size=2)
    try:
        ended = await finished(engine, JOBS)
    finally:
        await engine.dispose()
        await channel.close(None)
        if strike is not None:
            await strike
    return ended - started


async def _outcome(url: str) -> dict[str, float]:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            failed = (
                await conn.execute(
                    select(func.count()).where(_jobs.c.lifecycleStatus != "succeeded")
                )
            ).scalar_one()
            spent = (
                await conn.execute(
                    select(func.sum(_jobs.c.attemptCount - _jobs.c.waivedAttempts - 1))
                )
            ).scalar_one()
            fallback = (
                await conn.execute(select(func.count()).where(_jobs.c.modelTier == "fallback"))
            ).scalar_one()
    finally:
        await engine.dispose()
    return {
        "outage_failed": float(failed),
        "outage_attempts_spent": float(spent or 0),
        "outage_fallback_jobs": float(fallback),
    }


async def _run(outage: bool) -> tuple[float, dict[str, float]]:
    """One drain on a fresh database and fresh model servers: its makespan and, with the
    outage, its outcome."""
    primary, backup = (ScriptedModelServer(fault=f"latency:{LATENCY_MS}") for _ in range(2))
    for server in (primary, backup):
        server.start_in_thread()
    try:
        async with throwaway_database() as url:
            with (
                tempfile.TemporaryDirectory() as logs,
                spawn_schedulers(url, 1, env=SCHEDULER_ENV) as (scheduler,),
                runtimes(
                    scheduler.address,
                    primary.base_url,
                    Path(logs),
                    AIJOB_PROVIDER_BACKUP_BASE_URL=backup.base_url,
                    AIJOB_PROVIDER_BACKUP_API_KEY=PLATFORM_KEY,
                ),
            ):
                makespan = await _drain(url, scheduler.address, primary, outage)
            figures = await _outcome(url)
        figures["outage_primary_failed_calls"] = float(primary.state.counts[f"outage:{PRIMARY}"])
        return makespan, figures
    finally:
        for server in (primary, backup):
            server.shutdown()
            server.server_close()


async def main() -> dict[str, float]:
    clean, _ = await _run(outage=False)
    makespan, figures = await _run(outage=True)
    figures = {
        "outage_jobs": float(JOBS),
        **figures,
        "outage_clean_makespan_s": clean,
        "outage_makespan_s": makespan,
        "outage_makespan_vs_clean": makespan / clean,
    }
    print(
        f"\noutage storm: {JOBS} jobs, a 503 outage of the primary for {OUTAGE_S:.0f} s from "
        f"{OUTAGE_AT_S:.0f} s, fallback on a second provider, {LATENCY_MS} ms a call\n"
    )
    for name, value in figures.items():
        print(f"{name:44} {value:10.3f}")
    return figures


if __name__ == "__main__":
    asyncio.run(main())

"""A provider that holds calls open, and no limit configured: real runtime processes
against the scripted model in overload mode. The scheduler finds the capacity by itself — the
key's window starts small, and first tokens that come late (held calls) halve it — and no job
fails. The figures (calls open, p95 time to first token against unloaded) are the overload
storm's, in ``make bench-llm``: timing is measured there, not asserted here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf import json_format
from sqlalchemy import func, select

from devtools.harness.runtime_client import JobClient
from devtools.harness.waiting import eventually
from devtools.scripted_model import Overload, ScriptedModelServer
from scheduler_service.sql import model_key_statements as flow_sql
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from tests.support.db_checks import JOBS
from tests.support.fakes import running_model_server
from tests.support.runtime_procs import Launcher, runtime_launcher
from tests.support.schedulers import SchedulerFactory

pytestmark = pytest.mark.mysql

PLACES, RUNTIMES, SLOTS, COUNT = 4, 2, 16, 64


@pytest.fixture
def held_model() -> Iterator[ScriptedModelServer]:
    with running_model_server(
        fault="latency:100", overload=Overload(PLACES, hold_s=600.0, keepalive_s=0.5)
    ) as server:
        yield server


@pytest.fixture
def launch_on_held(tmp_path: Path, held_model: ScriptedModelServer) -> Iterator[Launcher]:
    with runtime_launcher(tmp_path, held_model) as start:
        yield start


async def test_held_calls_lower_the_window_and_no_job_fails(
    mysql_url: str,
    start_scheduler: SchedulerFactory,
    launch_on_held: Launcher,
    held_model: ScriptedModelServer,
) -> None:
    scheduler = await start_scheduler(
        mysql_url,
        model_initial_concurrency=4,
        model_latency_tolerance=1.5,
        max_active_jobs_per_user=1_000,
    )
    for n in range(RUNTIMES):
        launch_on_held(scheduler, f"rt-held-{n}", AIJOB_RUNTIME_SLOTS=str(SLOTS))
    items = []
    for n in range(COUNT):
        job = job_pb.CreateJobRequest(job_type="synthetic_echo")
        json_format.ParseDict({"n": n}, job.snapshot)
        items.append(job_pb.CreateJobsItem(job=job))
    client = JobClient(scheduler.channel, "held-caller")
    reply = await client.stub.CreateJobs(
        job_pb.CreateJobsRequest(items=items), metadata=client.metadata, timeout=60
    )
    assert all(result.status.code == 0 for result in reply.results)
    engine = scheduler.app.engine
    terminal = select(func.count()).where(
        JOBS.c.lifecycleStatus.in_(["succeeded", "failed", "cancelled"])
    )

    async def all_ended() -> bool:
        async with engine.connect() as conn:
            return bool((await conn.execute(terminal)).scalar_one() == COUNT)

    await eventually(all_ended, within_s=240)
    async with engine.connect() as conn:
        statuses: dict[str, int] = dict(
            (
                await conn.execute(
                    select(JOBS.c.lifecycleStatus, func.count()).group_by(JOBS.c.lifecycleStatus)
                )
            ).all()
        )
        (key,) = (await flow_sql.read_keys(conn))[1]
    assert statuses == {"succeeded": COUNT}
    # The provider held calls (the fleet has 32 slots for its 4 places), and the late first
    # tokens of calls leased after a decrease lowered the key's window: congestion was seen.
    assert held_model.state.stats()["held"] > 0
    assert key.decreasedAt is not None and key.growthThreshold is not None
    assert key.rateLimitedTotal == 0  # by latency alone: no 429 was ever answered

"""Runtime processes under chaos: one frozen past its lease then resumed (S2), and a poison job
that takes its runtime down on every attempt (S21)."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from devtools.harness.runtime_client import JobClient
from devtools.harness.waiting import eventually
from devtools.scripted_model import ScriptedModelServer
from tests.support.db_checks import ARTIFACTS, OUTBOX, count, events, job_row
from tests.support.runtime_procs import Launcher, in_flight, status_is
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql


def _logged(log: Path, action: str) -> bool:
    for line in log.read_text().splitlines():
        try:
            if json.loads(line).get("action") == action:
                return True
        except ValueError:
            continue
    return False


async def test_a_frozen_runtime_resumes_and_its_late_work_is_refused(
    short_leases: RunningScheduler,
    launch: Launcher,
    model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:
    scheduler = short_leases
    # The zombie's model call answers after 3 s: it has an output ready the moment it resumes.
    model_server.state.queued.append("latency:3000")
    zombie = launch(scheduler, "rt-zombie", AIJOB_RUNTIME_SLOTS="1")
    job = await JobClient(scheduler.channel).create()
    await in_flight(scheduler, job.job_id, model_server)
    zombie.send_signal(signal.SIGSTOP)
    try:
        launch(scheduler, "rt-heir")
        await status_is(scheduler, job.job_id, "succeeded")
    finally:
        zombie.send_signal(signal.SIGCONT)
    # Resumed, the zombie heartbeats or submits for attempt 1: refused, so it stops the job.
    await eventually(lambda: asyncio.to_thread(_logged, tmp_path / "rt-zombie.log", "lease_lost"))
    row = await job_row(scheduler.app.engine, job.job_id)
    assert (row["lifecycleStatus"], row["attemptCount"], row["lockedBy"]) == (
        "succeeded",
        2,
        "rt-heir",
    )
    assert row["resultIdempotencyKey"].startswith(f"{job.job_id}:2:")
    assert await count(scheduler.app.engine, ARTIFACTS, jobId=job.job_id) == 1
    assert await events(scheduler.app.engine, job.job_id) == ["ai.job.enqueue", "ai.job.completed"]
    assert zombie.poll() is None  # a refused lease stops the job, not the runtime


async def test_a_poison_job_fails_after_its_attempts_and_never_loops(
    short_leases: RunningScheduler,
    launch: Launcher,
    model_server: ScriptedModelServer,
) -> None:
    scheduler = short_leases
    jobs = JobClient(scheduler.channel)
    poison = await jobs.create(snapshot={"note": "scripted-fault=hang"})
    for attempt in (1, 2, 3):
        # Whatever runtime picks the job up dies with it (the crash is a SIGKILL mid-call).
        runtime = launch(scheduler, f"rt-victim-{attempt}", AIJOB_RUNTIME_SLOTS="1")

        async def leased(attempt: int = attempt) -> bool:
            row = await job_row(scheduler.app.engine, poison.job_id)
            return bool(row["lifecycleStatus"] == "running" and row["attemptCount"] == attempt)

        await eventually(leased)
        runtime.send_signal(signal.SIGKILL)
        await asyncio.to_thread(runtime.wait, 30)
    await status_is(scheduler, poison.job_id, "failed")
    row = await job_row(scheduler.app.engine, poison.job_id)
    assert (row["attemptCount"], row["errorCode"]) == (3, "LEASE_EXPIRED_ATTEMPTS_EXHAUSTED")
    assert await count(scheduler.app.engine, ARTIFACTS, jobId=poison.job_id) == 0
    assert await events(scheduler.app.engine, poison.job_id) == ["ai.job.enqueue", "ai.job.failed"]

    # A healthy runtime now runs other work and is never handed the poison job again.
    launch(scheduler, "rt-healthy")
    healthy = await jobs.create()
    await status_is(scheduler, healthy.job_id, "succeeded")
    assert (await job_row(scheduler.app.engine, poison.job_id))["attemptCount"] == 3
    assert await count(scheduler.app.engine, OUTBOX, aggregateId=poison.job_id) == 2

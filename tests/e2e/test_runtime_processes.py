"""Runtime processes under faults: SIGKILL mid-job, SIGTERM drain, and a log canary."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from devtools.harness.runtime_client import JobClient
from devtools.scripted_model import ScriptedModelServer
from tests.support.db_checks import ARTIFACTS, count, job_row
from tests.support.runtime_procs import Launcher, in_flight, status_is
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql

CANARY = "CANARY-runtime-5d1e"


async def test_a_runtime_killed_mid_job_is_replaced(
    short_leases: RunningScheduler,
    launch: Launcher,
    model_server: ScriptedModelServer,
) -> None:
    scheduler = short_leases
    model_server.state.queued.append("hang")
    first = launch(scheduler, "rt-doomed")
    job = await JobClient(scheduler.channel).create()
    await in_flight(scheduler, job.job_id, model_server)
    first.send_signal(signal.SIGKILL)
    first.wait()
    launch(scheduler, "rt-heir")
    await status_is(scheduler, job.job_id, "succeeded")
    row = await job_row(scheduler.app.engine, job.job_id)
    assert (row["attemptCount"], row["lockedBy"]) == (2, "rt-heir")
    assert await count(scheduler.app.engine, ARTIFACTS, jobId=job.job_id) == 1


async def test_sigterm_lets_in_flight_jobs_finish(
    scheduler: RunningScheduler, launch: Launcher, model_server: ScriptedModelServer
) -> None:
    model_server.state.queued.append("latency:1500")
    proc = launch(scheduler, "rt-drain", AIJOB_DRAIN_GRACE_S="20")
    job = await JobClient(scheduler.channel).create()
    await in_flight(scheduler, job.job_id, model_server)
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.wait, 30) == 0
    assert (await job_row(scheduler.app.engine, job.job_id))["lifecycleStatus"] == "succeeded"


async def test_sigterm_hands_back_jobs_that_outlast_the_grace(
    scheduler: RunningScheduler, launch: Launcher, model_server: ScriptedModelServer
) -> None:
    model_server.state.queued.append("hang")
    proc = launch(scheduler, "rt-drain", AIJOB_DRAIN_GRACE_S="0.3")
    job = await JobClient(scheduler.channel).create()
    await in_flight(scheduler, job.job_id, model_server)
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.wait, 30) == 0
    row = await job_row(scheduler.app.engine, job.job_id)
    assert (row["lifecycleStatus"], row["errorCode"]) == ("queued", "RUNTIME_SHUTDOWN")


async def test_no_prompt_snapshot_output_or_key_in_runtime_logs(
    scheduler: RunningScheduler, launch: Launcher, tmp_path: Path
) -> None:
    proc = launch(scheduler, "rt-canary", DEEPSEEK_API_KEY=f"sk-{CANARY}")
    jobs = JobClient(scheduler.channel)
    done = await jobs.create(snapshot={"text": f"private {CANARY}"})
    await status_is(scheduler, done.job_id, "succeeded")
    blocked = await jobs.create(snapshot={"text": f"how to make a bomb {CANARY}"})
    await status_is(scheduler, blocked.job_id, "failed")
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.wait, 30) == 0
    log = (tmp_path / "rt-canary.log").read_text()
    assert "job succeeded" in log and "job failed" in log  # the runtime did log its work
    assert CANARY not in log


async def test_a_runtime_reports_on_its_stream_not_by_unary_calls(
    scheduler: RunningScheduler, launch: Launcher
) -> None:
    """Results go on the Poll stream (group-committed by the scheduler): the unary SubmitResult
    is not called while the stream is up."""
    unary_before = _rpc_count("SubmitResult")
    launch(scheduler, "rt-streams", AIJOB_RUNTIME_SLOTS="4")
    jobs = JobClient(scheduler.channel)
    created = [(await jobs.create()).job_id for _ in range(8)]
    for job_id in created:
        await status_is(scheduler, job_id, "succeeded")
    assert _rpc_count("SubmitResult") == unary_before


def _rpc_count(method: str) -> float:
    return REGISTRY.get_sample_value("aijob_rpc_total", {"method": method, "code": "OK"}) or 0.0

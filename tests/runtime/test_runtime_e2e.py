"""The runtime end to end on MariaDB: the real scheduler, runtimes, and the scripted model."""

from __future__ import annotations

from datetime import timedelta

import pytest

from devtools.harness.runtime_client import JobClient
from devtools.harness.waiting import eventually
from devtools.scripted_model import ScriptedModelServer
from tests.runtime.conftest import RuntimeFactory
from tests.runtime.test_pipeline import SNAPSHOT
from tests.support.db_checks import ARTIFACTS, USAGE, count, job_row
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql


async def _status(scheduler: RunningScheduler, job_id: str) -> str:
    return str((await job_row(scheduler.app.engine, job_id))["lifecycleStatus"])


async def test_two_runtimes_run_all_five_job_types(
    scheduler: RunningScheduler, runtimes: RuntimeFactory
) -> None:
    runtimes("rt-a")
    runtimes("rt-b", stream_batch_frames=False)  # the single-message stream, beside frames
    jobs = JobClient(scheduler.channel)
    from google.protobuf import struct_pb2

    created = {}
    for job_type in (
        "learning_state_analysis",
        "weak_point_analysis",
        "next_action_planning",
        "quiz_generation",
        "flashcard_generation",
    ):
        params = struct_pb2.Struct()
        if job_type in ("quiz_generation", "flashcard_generation"):
            params.update({"count": 3})
        created[job_type] = (await jobs.create(job_type, snapshot=SNAPSHOT, params=params)).job_id

    async def all_done() -> bool:
        return all([await _status(scheduler, j) == "succeeded" for j in created.values()])

    await eventually(all_done)
    for job_type, job_id in created.items():
        job = await jobs.get(job_id)
        assert job.result.artifact_count >= 1, job_type
        assert (
            await count(scheduler.app.engine, ARTIFACTS, jobId=job_id) == job.result.artifact_count
        )
        assert await count(scheduler.app.engine, USAGE, jobId=job_id) == 1
    assert job.result.artifact_count == 3  # the last one: flashcards, count 3


async def test_rate_limit_with_retry_after_then_success(
    scheduler: RunningScheduler, runtimes: RuntimeFactory, model_server: ScriptedModelServer
) -> None:
    model_server.state.queued.append("429:1")
    runtimes("rt-a", runtime_slots=1)
    job = await JobClient(scheduler.channel).create()

    async def done() -> bool:
        return await _status(scheduler, job.job_id) == "succeeded"

    await eventually(done)
    row = await job_row(scheduler.app.engine, job.job_id)
    assert row["attemptCount"] == 2
    # Attempt 2 started no sooner than the Retry-After after attempt 1 failed (database time).
    assert row["startedAt"] - row["queuedAt"] >= timedelta(seconds=1) - timedelta(milliseconds=5)
    assert await count(scheduler.app.engine, USAGE, jobId=job.job_id) == 2
    assert (
        await count(scheduler.app.engine, USAGE, jobId=job.job_id, errorCode="MODEL_RATE_LIMIT")
        == 1
    )


async def test_a_cancel_reaches_a_running_job(
    scheduler: RunningScheduler, runtimes: RuntimeFactory, model_server: ScriptedModelServer
) -> None:
    model_server.state.queued.append("hang")
    runtimes("rt-a", runtime_slots=1)
    jobs = JobClient(scheduler.channel)
    job = await jobs.create()

    async def running() -> bool:
        return (
            await _status(scheduler, job.job_id) == "running"
            and model_server.state.counts["requests"] > 0
        )

    await eventually(running)
    await jobs.cancel(job.job_id)

    async def cancelled() -> bool:
        return await _status(scheduler, job.job_id) == "cancelled"

    await eventually(cancelled, within_s=5)
    assert (await job_row(scheduler.app.engine, job.job_id))["errorCode"] == "CANCELLED"

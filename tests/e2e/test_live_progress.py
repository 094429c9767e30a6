"""Live progress end to end: a 10 s scripted generation, run by a real runtime
process, moves WatchJob through at least five progress values before it ends."""

from __future__ import annotations

import pytest

from devtools.harness.runtime_client import JobClient
from devtools.scripted_model import ScriptedModelServer
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from tests.support.runtime_procs import Launcher
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql


async def test_a_ten_second_generation_streams_progress_to_watchers(
    scheduler: RunningScheduler, launch: Launcher, model_server: ScriptedModelServer
) -> None:
    model_server.state.queued.append("drip:10000")
    jobs = JobClient(scheduler.channel, "watcher")
    # An answer of about 1,000 tokens: half of the definition's 2,000-token cap.
    job = await jobs.create(snapshot={"text": "x" * 4_000})
    launch(scheduler, "rt-progress")
    seen: list[int] = []
    final = ""
    async for state in jobs.stub.WatchJob(
        job_pb.WatchJobRequest(job_id=job.job_id), metadata=jobs.metadata, timeout=120
    ):
        seen.append(state.progress)
        final = state.lifecycle_status
    assert final == "succeeded"
    moving = {p for p in seen if 0 < p < 100}
    assert len(moving) >= 5, seen
    assert seen == sorted(seen)

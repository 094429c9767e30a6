"""A runtime SIGKILLed mid-generation (issue 31), with real runtime processes and the scripted
model over HTTP: the StreamOutput caller read the killed attempt's chunks as they were written;
the next attempt continued the stored text instead of starting over, so the completion tokens
of both calls come to at most 1.1 times one unbroken call; its chunks are the whole answer, the
text the result's hash is over; the usage of the attempt that finished is recorded."""

from __future__ import annotations

import json

import pytest

from devtools.harness.resume import kill_mid_generation
from devtools.scripted_model import ScriptedModelServer
from shared.canonical_json import output_hash
from tests.support.db_checks import USAGE, count
from tests.support.runtime_procs import Launcher
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql


async def test_the_attempt_after_a_kill_resumes_the_text(
    short_leases: RunningScheduler, launch: Launcher, model_server: ScriptedModelServer
) -> None:
    scheduler = short_leases
    run = await kill_mid_generation(
        scheduler.channel,
        lambda name: launch(scheduler, name, AIJOB_OUTPUT_CHUNK_MS="50"),
        model_server.state.stats,
    )
    assert run.chunks_before_kill >= 5
    assert run.job.lifecycle_status == "succeeded"
    assert run.final_attempt == run.job.attempt_count == 2
    assert run.job.result.output_hash == output_hash(json.loads(run.text))
    assert run.ratio <= 1.1, (run.completion_tokens, run.unbroken_tokens)
    assert await count(scheduler.app.engine, USAGE, jobId=run.job.job_id) == 1

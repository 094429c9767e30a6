"""Partial outputs end to end, with real runtime processes and the scripted model over
HTTP. A quiz's answer reaches a StreamOutput caller in chunks while it is written; a caller that
reconnects from an offset gets the rest with no gap and no duplicate, and the text is the one the
result's hash is over. A runtime SIGKILLed mid-generation: the caller read the killed attempt's
chunks as they were written; the next attempt continued the stored text instead of starting over,
so the completion tokens of both calls come to at most 1.1 times one unbroken call; its chunks
are the whole answer; the usage of the attempt that finished is recorded."""

from __future__ import annotations

import itertools
import json

import pytest

from devtools.harness.resume import SNAPSHOT, kill_mid_generation
from devtools.harness.runtime_client import JobClient
from devtools.scripted_model import ScriptedModelServer
from shared.canonical_json import output_hash
from shared.gen.aijob.v1 import types_pb2
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


async def test_a_caller_reads_the_answer_as_it_is_written_and_resumes_from_an_offset(
    scheduler: RunningScheduler, launch: Launcher
) -> None:
    jobs = JobClient(scheduler.channel, "user-stream")
    snapshot = {**SNAPSHOT, "material": {"id": "m-1", "title": "scripted-fault=drip:3000"}}
    job = await jobs.create("quiz_generation", snapshot=snapshot)
    launch(scheduler, "rt-stream", AIJOB_OUTPUT_CHUNK_MS="50")
    first = jobs.stream_output(job.job_id)
    read = [await first.read() for _ in range(3)]
    assert all(isinstance(c, types_pb2.OutputChunk) for c in read)
    first.cancel()
    head = "".join(c.text for c in read)
    resume_at = len(head) - 2  # inside the last chunk read
    rest = [c async for c in jobs.stream_output(job.job_id, resume_at)]
    assert rest[0].offset == resume_at
    assert all(b.offset == a.offset + len(a.text) for a, b in itertools.pairwise(rest))
    text = head[:resume_at] + "".join(c.text for c in rest)
    assert len(read) + len(rest) >= 5  # chunks while the answer was written, then the job ended
    done = await jobs.get(job.job_id)
    assert done.lifecycle_status == "succeeded"
    assert done.result.output_hash == output_hash(json.loads(text))
    assert all(c.attempt_no == 1 for c in read + rest)

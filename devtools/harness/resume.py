"""A runtime killed mid-generation, and the attempt after it: used by the end-to-end
test and by the bench's ``resume_completion_tokens_ratio``.

A ``quiz_generation`` job whose every model call drips its answer (the scripted model's fault
marker in the snapshot) is run by one runtime process; a StreamOutput caller reads its chunks;
after a few the runtime is SIGKILLed and another started. Once the lease has expired the next
attempt continues the stored text, and the caller reads that attempt's chunks to the end. The
scripted model counts the completion tokens each call wrote, the killed one included.
"""

from __future__ import annotations

import math
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from devtools.harness.runtime_client import JobClient
from devtools.harness.waiting import eventually
from shared.gen.aijob.v1 import types_pb2

__all__ = ["ResumeRun", "kill_mid_generation"]

#: The learning snapshot every generation job type takes; the title carries the fault marker.
SNAPSHOT: dict[str, Any] = {
    "learner": {"id": "l-resume"},
    "material": {"id": "m-1", "title": "Cells"},
    "knowledgePoints": [
        {"id": "k-1", "name": "Mitochondria", "mastery": 0.2},
        {"id": "k-2", "name": "Ribosomes", "mastery": 0.5},
    ],
    "answers": [{"questionId": "q-1", "knowledgePointId": "k-1", "correct": False}],
}


@dataclass(frozen=True)
class ResumeRun:
    #: Chunks the caller read from the killed attempt.
    chunks_before_kill: int
    #: The attempt that finished, and its chunks' text (the whole answer).
    final_attempt: int
    text: str
    #: Completion tokens over every call of the job, and what one unbroken call writes.
    completion_tokens: int
    unbroken_tokens: int
    job: types_pb2.Job

    @property
    def ratio(self) -> float:
        return self.completion_tokens / self.unbroken_tokens


async def kill_mid_generation(
    channel: grpc.aio.Channel,
    launch: Callable[[str], subprocess.Popen[bytes]],
    model_stats: Callable[[], dict[str, Any]],
    *,
    drip_ms: int = 6_000,
    kill_after_chunks: int = 6,
) -> ResumeRun:
    calls_before = len(model_stats()["call_completion_tokens"])
    jobs = JobClient(channel, "user-resume")
    snapshot = {**SNAPSHOT, "material": {"id": "m-1", "title": f"scripted-fault=drip:{drip_ms}"}}
    job = await jobs.create("quiz_generation", snapshot=snapshot)
    doomed = launch("rt-resume-doomed")
    stream = jobs.stream_output(job.job_id)
    read = 0
    while read < kill_after_chunks:
        chunk = await stream.read()
        assert isinstance(chunk, types_pb2.OutputChunk) and chunk.attempt_no == 1, chunk
        read += 1
    doomed.send_signal(signal.SIGKILL)
    doomed.wait()
    launch("rt-resume-heir")
    final: list[types_pb2.OutputChunk] = []
    while isinstance(chunk := await stream.read(), types_pb2.OutputChunk):
        if chunk.attempt_no > 1:
            final.append(chunk)
    done = await jobs.get(job.job_id)

    async def both_calls_counted() -> bool:
        return len(model_stats()["call_completion_tokens"]) >= calls_before + 2

    await eventually(both_calls_counted)
    calls = model_stats()["call_completion_tokens"][calls_before:]
    text = "".join(chunk.text for chunk in final)
    return ResumeRun(
        chunks_before_kill=read,
        final_attempt=final[-1].attempt_no if final else 0,
        text=text,
        completion_tokens=sum(calls),
        unbroken_tokens=math.ceil(len(text) / 4),
        job=done,
    )

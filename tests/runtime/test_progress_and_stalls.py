"""Live progress and stalled streams: the runtime reports progress from the tokens
it received against the output cap, at most once per ``progress_every_s``; it sends the cap as
``max_tokens``; a stream that stops sending tokens ends the attempt as MODEL_TIMEOUT before the
job's timeout. Against the scripted model's HTTP, with a fake scheduler."""

from __future__ import annotations

from devtools.scripted_model import ScriptedModelServer
from runtime_service.pipeline import STREAM_PROGRESS, JobRunner, ModelConfig
from runtime_service.safety import PatternSafetyCheck
from tests.support.fakes import FakeScheduler, lease

#: A snapshot whose echo answer is about 4,000 characters: 1,000 tokens, half of a 2,000 cap.
LONG = {"text": "x" * 4_000}


def _runner(scheduler: FakeScheduler, server: ScriptedModelServer, **kw: float) -> JobRunner:
    return JobRunner(
        scheduler,
        ModelConfig(base_url=server.base_url, model_name="scripted", platform_key="sk-platform"),
        PatternSafetyCheck([]),
        **kw,  # type: ignore[arg-type]
    )


async def test_a_long_answer_reports_progress_as_it_streams(
    model_server: ScriptedModelServer,
) -> None:
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server, heartbeat_s=60, progress_every_s=0.05)
    model_server.state.queued.append("drip:1500")
    try:
        outcome = await runner.run(lease(snapshot=LONG, max_output_tokens=2_000))
    finally:
        await runner.close()
    assert outcome == "succeeded"
    streamed = [p for p in scheduler.heartbeats if STREAM_PROGRESS[0] < p <= STREAM_PROGRESS[1]]
    assert len(set(streamed)) >= 5, scheduler.heartbeats
    assert scheduler.heartbeats == sorted(scheduler.heartbeats)  # it only moves forward
    # About half of the cap arrived: progress went about half of the way.
    assert max(streamed) <= (STREAM_PROGRESS[0] + STREAM_PROGRESS[1]) // 2 + 2


async def test_the_cap_is_sent_as_max_tokens(model_server: ScriptedModelServer) -> None:
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server)
    try:
        # The scripted model cuts the answer at max_tokens, as providers do.
        outcome = await runner.run(lease(snapshot=LONG, max_output_tokens=50))
    finally:
        await runner.close()
    assert outcome == "MODEL_OUTPUT_TRUNCATED"


async def test_a_stalled_stream_ends_the_attempt_before_the_job_timeout(
    model_server: ScriptedModelServer,
) -> None:
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server, stall_s=0.2)
    model_server.state.queued.append("stall:20000")
    try:
        outcome = await runner.run(lease(snapshot=LONG, timeout_ms=60_000))
    finally:
        await runner.close()
    assert outcome == "MODEL_TIMEOUT"
    ((failure, usage),) = scheduler.failures
    assert failure.retryable and failure.internal_message == "no token for 0.2 s after the first"
    assert usage is not None  # the call was made: its time is recorded

"""What a model call costs, against the scripted model answering as DeepSeek does today (it
thinks unless told not to): every call says how the model thinks, reasoning never enters the
answer but is counted and priced as output, a blank JSON answer is a retryable failure of its
own with no repair call, and the v2 prompt puts the snapshot first, byte-stable."""

from __future__ import annotations

import json

import pytest

from devtools.scripted_model import ScriptedModelServer
from runtime_service.pipeline import JobRunner, ModelConfig
from runtime_service.safety import PatternSafetyCheck
from shared.job_types.reasoning import EFFORTS
from tests.support.fakes import FakeScheduler, lease

SNAPSHOT = {
    "learner": {"id": "l-1"},
    "material": {"id": "m-1", "title": "Cells"},
    "knowledgePoints": [{"id": "k-1", "name": "Mitochondria", "mastery": 0.2}],
    "answers": [{"questionId": "q-1", "knowledgePointId": "k-1", "correct": False}],
}


def _runner(scheduler: FakeScheduler, server: ScriptedModelServer) -> JobRunner:
    return JobRunner(
        scheduler,
        ModelConfig(
            base_url=server.base_url,
            model_name="scripted",
            platform_key="sk-platform",
            price_prompt_per_mtok_micros=1_000_000,
            price_completion_per_mtok_micros=2_000_000,
        ),
        PatternSafetyCheck([]),
    )


@pytest.mark.parametrize("effort", EFFORTS)
async def test_every_call_says_how_the_model_thinks_and_reasoning_is_billed_not_answered(
    model_server: ScriptedModelServer, effort: str
) -> None:
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server)
    job = lease(
        "weak_point_analysis", snapshot=SNAPSHOT, prompt_version="v2", reasoning_effort=effort
    )
    assert await runner.run(job) == "succeeded"
    await runner.close()
    # Off is said out loud (the provider's default is to think); on, with its effort.
    assert model_server.state.efforts == ["" if effort == "off" else effort]
    ((output, usage),) = scheduler.results
    assert "step by step" not in json.dumps(output)
    assert usage is not None
    # Reasoning is written at 1, 3 or 6 tokens per answer token (the scripted model's rule).
    per_answer_token = {"off": 0, "low": 1, "high": 3, "max": 6}[effort]
    answered = usage.completion_tokens - usage.reasoning_tokens
    assert usage.reasoning_tokens == per_answer_token * max(64, answered)
    # Reasoning tokens are completion tokens, priced as output.
    assert usage.cost_micros == usage.prompt_tokens + 2 * usage.completion_tokens


async def test_a_blank_json_answer_is_a_retryable_failure_of_its_own_with_no_repair(
    model_server: ScriptedModelServer,
) -> None:
    model_server.state.queued.append("blank")
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server)
    assert await runner.run(lease()) == "MODEL_BLANK_ANSWER"
    await runner.close()
    ((failure, _),) = scheduler.failures
    assert failure.retryable
    assert model_server.state.counts["requests"] == 1  # no repair call


async def test_the_v2_prompt_puts_the_snapshot_first_whatever_order_its_keys_came_in(
    model_server: ScriptedModelServer,
) -> None:
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server)
    # A material of some length: the provider stores a prefix unit every 1,024 tokens of it.
    long = {**SNAPSHOT, "material": {"id": "m-1", "title": "Cells", "content": "ATP. " * 2_000}}
    reordered = dict(reversed(list(long.items())))
    for job_type, snapshot in (("weak_point_analysis", long), ("quiz_generation", reordered)):
        job = lease(job_type, snapshot=snapshot, prompt_version="v2")
        assert await runner.run(job) == "succeeded"
    await runner.close()
    first, second = model_server.state.prompts
    rendered = json.dumps(long, sort_keys=True, separators=(",", ":"))
    shared = next(
        (i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b),
        min(len(first), len(second)),
    )
    assert rendered in first[:shared]
    # The first call left units inside the shared prefix: the second is billed cache hits.
    (_, first_usage), (_, second_usage) = scheduler.results
    assert first_usage is not None and second_usage is not None
    assert first_usage.cached_prompt_tokens == 0 < second_usage.cached_prompt_tokens


@pytest.mark.parametrize("asked", [True, False])
async def test_the_first_token_is_told_at_once_when_the_lease_asks(
    model_server: ScriptedModelServer, asked: bool
) -> None:
    """Jobs waiting to share this one's prompt prefix go when its first token arrives: the
    runtime says so in a heartbeat of its own (the answer drips in over seconds, so the attempt
    is still running), and only when the lease asks."""
    model_server.state.queued.append("drip:3000")
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server)
    assert await runner.run(lease(tell_first_token=asked)) == "succeeded"
    await runner.close()
    assert scheduler.first_tokens == (1 if asked else 0)


async def test_a_thinking_calls_cap_leaves_room_for_its_reasoning(
    model_server: ScriptedModelServer,
) -> None:
    """Reasoning counts against ``max_tokens``: a cap sized for the answer alone (300 tokens,
    here less than the reasoning at ``max``) would end the call before its answer starts."""
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server)
    job = lease(
        "weak_point_analysis",
        snapshot=SNAPSHOT,
        prompt_version="v2",
        reasoning_effort="max",
        max_output_tokens=300,
    )
    assert await runner.run(job) == "succeeded"
    await runner.close()
    ((_, usage),) = scheduler.results
    assert usage is not None and usage.reasoning_tokens > 300

"""One job through the pipeline against a fake scheduler and the scripted model over real HTTP:
every fault maps to its catalogue code and retry decision; cancels stop the HTTP call at once."""

from __future__ import annotations

import asyncio

import pytest

from devtools.harness.waiting import eventually
from devtools.scripted_model import ScriptedModelServer
from runtime_service.pipeline import JobRunner, ModelConfig
from runtime_service.safety import PatternSafetyCheck
from shared.job_schemas import OUTPUT_SCHEMAS
from tests.support.fakes import FakeScheduler, lease

SNAPSHOT = {
    "learner": {"id": "l-1"},
    "material": {"id": "m-1", "title": "Cells"},
    "knowledgePoints": [{"id": "k-1", "name": "Mitochondria", "mastery": 0.2}],
    "answers": [{"questionId": "q-1", "knowledgePointId": "k-1", "correct": False}],
}


def _runner(scheduler: FakeScheduler, server: ScriptedModelServer, **kw: object) -> JobRunner:
    return JobRunner(
        scheduler,
        ModelConfig(
            base_url=server.base_url,
            model_name="scripted",
            platform_key="sk-platform",
            price_prompt_per_mtok_micros=1_000_000,
            price_completion_per_mtok_micros=2_000_000,
        ),
        PatternSafetyCheck([r"(?i)forbidden-topic"]),
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    "job_type",
    [
        "learning_state_analysis",
        "weak_point_analysis",
        "next_action_planning",
        "quiz_generation",
        "flashcard_generation",
        "synthetic_echo",
    ],
)
async def test_every_job_type_succeeds_with_a_valid_output(
    model_server: ScriptedModelServer, job_type: str
) -> None:
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server)
    params = {"count": 3} if job_type in ("quiz_generation", "flashcard_generation") else {}
    assert await runner.run(lease(job_type, snapshot=SNAPSHOT, params=params)) == "succeeded"
    ((output, usage),) = scheduler.results
    OUTPUT_SCHEMAS[(job_type, "v1")].model_validate(output)
    assert usage is not None and usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.cost_micros == usage.prompt_tokens + 2 * usage.completion_tokens
    await runner.close()


@pytest.mark.parametrize(
    ("faults", "code", "retryable"),
    [
        (["429:2"], "MODEL_RATE_LIMIT", True),
        (["500"], "TEMPORARY_PROVIDER_ERROR", True),
        (["503"], "TEMPORARY_PROVIDER_ERROR", True),
        (["400"], "MODEL_BAD_REQUEST", False),
        (["422"], "MODEL_BAD_REQUEST", False),
        (["402"], "MODEL_INSUFFICIENT_BALANCE", False),
        (["404"], "MODEL_NOT_FOUND", False),
        (["401"], "INVALID_CREDENTIAL", False),
        (["403"], "INVALID_CREDENTIAL", False),
        (["context"], "MODEL_CONTEXT_LENGTH_EXCEEDED", False),
        (["length"], "MODEL_OUTPUT_TRUNCATED", False),
        (["malformed", "malformed"], "VALIDATION_UNPARSEABLE", True),
        (["schema", "schema"], "VALIDATION_FAILED", True),
    ],
)
async def test_faults_map_to_the_catalogue(
    model_server: ScriptedModelServer, faults: list[str], code: str, retryable: bool
) -> None:
    model_server.state.queued.extend(faults)
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server)
    assert await runner.run(lease()) == code
    ((failure, usage),) = scheduler.failures
    assert (failure.code.value, failure.retryable) == (code, retryable)
    assert not scheduler.results
    assert usage is not None and usage.latency_ms >= 0  # failed calls are recorded too
    if code == "MODEL_RATE_LIMIT":
        assert failure.retry_after_ms == 2_000
    await runner.close()


@pytest.mark.parametrize(
    ("fault", "provider_says"),
    [
        ("400", "Unsupported parameter: 'response_format' in this context."),
        ("404", "The model `no-such-model` does not exist."),
        ("context", "This model's maximum context length is 65536 tokens."),
        ("503", "Server overloaded, please retry shortly."),
    ],
)
async def test_the_providers_message_is_kept_for_operators(
    model_server: ScriptedModelServer, fault: str, provider_says: str
) -> None:
    model_server.state.queued.append(fault)
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server)
    await runner.run(lease())
    ((failure, _),) = scheduler.failures
    assert failure.internal_message == f"HTTP {failure_status(fault)}: {provider_says}"
    assert provider_says not in failure.public_message
    await runner.close()


def failure_status(fault: str) -> int:
    return 400 if fault == "context" else int(fault)


async def test_a_fenced_json_answer_is_unwrapped(model_server: ScriptedModelServer) -> None:
    model_server.state.queued.append("fenced")
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server)
    assert await runner.run(lease()) == "succeeded"
    assert model_server.state.counts["requests"] == 1  # no repair call was needed
    await runner.close()


@pytest.mark.parametrize("repairs", [0, 1, 3])
async def test_schema_repairs_have_their_own_budget(
    model_server: ScriptedModelServer, repairs: int
) -> None:
    model_server.state.queued.extend(["schema"] * (repairs + 1))
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server, schema_repairs=repairs)
    assert await runner.run(lease()) == "VALIDATION_FAILED"
    assert model_server.state.counts["requests"] == repairs + 1
    await runner.close()
    model_server.state.queued.extend(["schema"] * repairs)
    runner = _runner(scheduler, model_server, schema_repairs=repairs)
    assert await runner.run(lease()) == "succeeded"  # the last repair call was answered well
    await runner.close()


async def test_one_repair_call_fixes_a_bad_answer(model_server: ScriptedModelServer) -> None:
    model_server.state.queued.extend(["schema"])
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server)
    assert await runner.run(lease()) == "succeeded"
    assert model_server.state.counts["requests"] == 2
    await runner.close()


async def test_unreachable_model_is_a_network_error() -> None:
    scheduler = FakeScheduler()
    runner = JobRunner(
        scheduler, ModelConfig("http://127.0.0.1:9/v1", "m", "k"), PatternSafetyCheck([])
    )
    assert await runner.run(lease()) == "NETWORK_ERROR"
    assert scheduler.failures[0][0].retryable is True
    await runner.close()


async def test_job_timeout(model_server: ScriptedModelServer) -> None:
    model_server.state.queued.append("hang")
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server)
    assert await runner.run(lease(timeout_ms=1_000)) == "JOB_TIMEOUT"
    assert scheduler.failures[0][0].retryable is True
    await runner.close()


async def test_content_safety_blocks_before_and_after_the_call(
    model_server: ScriptedModelServer,
) -> None:
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server)
    assert (
        await runner.run(lease(snapshot={"text": "a Forbidden-Topic here"}))
        == "CONTENT_SAFETY_BLOCKED"
    )
    assert model_server.state.counts["requests"] == 0  # blocked before any model call
    assert scheduler.failures[0][0].retryable is False
    assert "Forbidden" not in scheduler.failures[0][0].internal_message
    await runner.close()


async def _until_the_model_has_the_request(server: ScriptedModelServer) -> None:
    async def received() -> bool:
        return server.state.counts["requests"] > 0  # counted in the server's own thread

    await eventually(received, within_s=10, every_s=0.01)


async def test_a_pushed_cancel_stops_the_hanging_http_call(
    model_server: ScriptedModelServer,
) -> None:
    """The model never answers (an hour's hang); the cancel ends the call: the job is CANCELLED,
    which it could not be if it had waited for the model (that ends in a timeout)."""
    model_server.state.queued.append("hang")
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server)
    job = asyncio.ensure_future(runner.run(lease()))
    await _until_the_model_has_the_request(model_server)
    assert runner.cancel("job-1", 1)
    assert await asyncio.wait_for(job, timeout=120) == "CANCELLED"
    assert scheduler.failures[0][0].retryable is False
    await runner.close()


async def test_a_cancel_seen_in_a_heartbeat_stops_the_job(
    model_server: ScriptedModelServer,
) -> None:
    model_server.state.queued.append("hang")
    scheduler = FakeScheduler(cancel_requested=True)
    runner = _runner(scheduler, model_server, heartbeat_s=0.05)
    assert await asyncio.wait_for(runner.run(lease()), timeout=60) == "CANCELLED"
    assert scheduler.heartbeats
    await runner.close()


async def test_a_lost_lease_stops_the_job_without_submitting(
    model_server: ScriptedModelServer,
) -> None:
    model_server.state.queued.append("hang")
    scheduler = FakeScheduler(lease_lost=True)
    runner = _runner(scheduler, model_server, heartbeat_s=0.05)
    assert await asyncio.wait_for(runner.run(lease()), timeout=60) == "lease_lost"
    assert not scheduler.results and not scheduler.failures
    await runner.close()


async def test_user_keys_are_resolved_from_the_scheduler(model_server: ScriptedModelServer) -> None:
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server)
    assert await runner.run(lease(credential_mode="user_deepseek_key")) == "succeeded"
    await runner.close()


@pytest.mark.parametrize(
    ("named", "called"), [("deepseek-reasoner", "deepseek-reasoner"), ("", "scripted")]
)
async def test_the_runtime_calls_the_model_the_lease_names(
    model_server: ScriptedModelServer, named: str, called: str
) -> None:
    """The job's definition names the model (it travels on the lease); the runtime's
    own AIJOB_MODEL_NAME is only the fallback for a lease that names none."""
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server)
    assert await runner.run(lease(model_name=named)) == "succeeded"
    ((_, usage),) = scheduler.results
    assert usage is not None and usage.model_name == called  # the server answers the model asked
    await runner.close()


async def test_calls_stream_and_report_the_time_to_first_token(
    model_server: ScriptedModelServer,
) -> None:
    model_server.state.queued.append("latency:80")
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server)
    assert await runner.run(lease()) == "succeeded"
    ((_, usage),) = scheduler.results
    assert usage is not None and usage.time_to_first_token_ms is not None
    assert usage.time_to_first_token_ms >= 80  # the model answered after 80 ms
    assert usage.latency_ms >= usage.time_to_first_token_ms
    assert usage.completion_tokens > 0  # the stream's usage chunk
    await runner.close()

"""The scripted model limits calls per API key like an OpenAI-compatible provider: the pure
windows, and the server answering 429 with Retry-After and the x-ratelimit-* headers over HTTP."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from devtools.scripted_limits import KeyLimits, ProviderLimits, reset_text
from devtools.scripted_model import ScriptedModelServer, key_label
from runtime_service.pipeline import JobRunner, ModelConfig
from runtime_service.safety import PatternSafetyCheck
from tests.support.fakes import FakeScheduler, lease

KEY_A, KEY_B = "sk-test-aaaaaaaaaaaa", "sk-test-bbbbbbbbbbbb"


def test_requests_per_minute_slide_with_the_window() -> None:
    limits = ProviderLimits(KeyLimits(rpm=2))
    assert limits.admit(KEY_A, 10, now=0.0).admitted
    limits.done(KEY_A)
    assert limits.admit(KEY_A, 10, now=10.0).admitted
    limits.done(KEY_A)
    refused = limits.admit(KEY_A, 10, now=20.0)
    assert not refused.admitted
    assert refused.retry_after_s == pytest.approx(40.0)
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    assert limits.admit(KEY_B, 10, now=20.0).admitted  # another key has its own window
    assert limits.admit(KEY_A, 10, now=60.5).admitted  # the first request left the window


def test_tokens_per_minute_count_what_the_requests_may_use() -> None:
    limits = ProviderLimits(KeyLimits(tpm=1_000))
    assert limits.admit(KEY_A, 600, now=0.0).admitted
    refused = limits.admit(KEY_A, 600, now=1.0)
    assert not refused.admitted
    assert refused.retry_after_s == pytest.approx(59.0)
    assert refused.headers["x-ratelimit-remaining-tokens"] == "400"
    assert limits.admit(KEY_A, 400, now=1.0).admitted


def test_concurrency_counts_calls_in_progress() -> None:
    limits = ProviderLimits(KeyLimits(concurrency=1))
    assert limits.admit(KEY_A, 1, now=0.0).admitted
    assert not limits.admit(KEY_A, 1, now=0.0).admitted
    limits.done(KEY_A)
    assert limits.admit(KEY_A, 1, now=0.0).admitted


def test_reset_is_written_as_providers_write_it() -> None:
    assert [reset_text(s) for s in (0.25, 1.0, 59.2, 360.0)] == ["250ms", "1s", "1m0s", "6m0s"]


@pytest.fixture
def limited_server() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer(limits=KeyLimits(rpm=3, tpm=100_000))
    server.start_in_thread()
    yield server
    server.shutdown()
    server.server_close()


def _call(server: ScriptedModelServer, key: str) -> tuple[int, Any]:
    body = json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 10}
    ).encode()
    request = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=body,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.headers
    except urllib.error.HTTPError as error:
        return error.code, error.headers


def test_the_server_answers_429_with_retry_after_and_rate_limit_headers(
    limited_server: ScriptedModelServer,
) -> None:
    answers = [_call(limited_server, KEY_A) for _ in range(4)]
    assert [status for status, _ in answers] == [200, 200, 200, 429]
    ok_headers, limited_headers = answers[0][1], answers[3][1]
    assert ok_headers["x-ratelimit-limit-requests"] == "3"
    assert ok_headers["x-ratelimit-remaining-requests"] == "2"
    assert ok_headers["x-ratelimit-limit-tokens"] == "100000"
    assert limited_headers["x-ratelimit-remaining-requests"] == "0"
    assert 1 <= int(limited_headers["Retry-After"]) <= 60
    assert _call(limited_server, KEY_B)[0] == 200

    with urllib.request.urlopen(
        limited_server.base_url.removesuffix("/v1") + "/control/stats", timeout=30
    ) as reply:
        stats = json.loads(reply.read())
    assert (stats["requests"], stats["rate_limited"]) == (5, 1)
    # A call counts as in progress until its answer is written, and a client may start its next
    # call before the server has counted the last one out: sequential calls can show 2 here.
    # max_concurrent is checked exactly where calls cannot overlap (test_scripted_overload.py).
    assert stats["max_concurrent"] >= 1
    per_key = stats["keys"][key_label(KEY_A)]
    assert (per_key["requests"], per_key["rate_limited"]) == (4, 1)
    assert stats["keys"][key_label(KEY_B)]["requests"] == 1
    assert KEY_A not in json.dumps(stats)  # keys appear as fingerprints only


async def test_the_runtime_reports_the_providers_rate_limit_headers() -> None:
    """The provider's x-ratelimit-* headers travel with each result and failure."""
    server = ScriptedModelServer(limits=KeyLimits(rpm=2))
    server.start_in_thread()
    scheduler = FakeScheduler()
    runner = JobRunner(
        scheduler,
        ModelConfig(base_url=server.base_url, model_name="scripted", platform_key=KEY_A),
        PatternSafetyCheck([]),
    )
    try:
        assert await runner.run(lease(job_id="j-1")) == "succeeded"
        assert await runner.run(lease(job_id="j-2")) == "succeeded"
        assert await runner.run(lease(job_id="j-3")) == "MODEL_RATE_LIMIT"
    finally:
        await runner.close()
        server.shutdown()
        server.server_close()
    (_, first), (_, second) = scheduler.results
    assert first is not None and first.rate_limits is not None
    assert (first.rate_limits.limit_requests, first.rate_limits.remaining_requests) == (2, 1)
    assert second is not None and second.rate_limits is not None
    assert second.rate_limits.remaining_requests == 0
    assert 0 < (second.rate_limits.reset_requests_ms or 0) <= 60_000
    ((failure, usage),) = scheduler.failures
    assert usage is not None and usage.rate_limits is not None
    assert usage.rate_limits.remaining_requests == 0 and failure.retry_after_ms >= 1_000


def test_a_client_hanging_up_prints_no_traceback_and_other_errors_still_do(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = ScriptedModelServer()
    try:
        for error in (ConnectionResetError(104, "reset"), BrokenPipeError(32, "pipe"), KeyError()):
            try:
                raise error
            except Exception:
                server.handle_error(None, ("127.0.0.1", 1))
    finally:
        server.server_close()
    printed = capsys.readouterr().err
    assert "KeyError" in printed
    assert "ConnectionResetError" not in printed and "BrokenPipeError" not in printed

"""The scripted model under load the way DeepSeek behaves: calls past the
overload threshold are held open with blank lines or keep-alive comments until a place frees, a
hold that runs out ends in a 503 error, and streaming answers are server-sent events."""

from __future__ import annotations

import asyncio
import http.client
import json
from collections.abc import Iterator, Mapping
from urllib.parse import urlsplit

import openai
import pytest

from devtools.harness.waiting import eventually
from devtools.scripted_model import Overload, ScriptedModelServer
from runtime_service.pipeline import JobRunner, ModelConfig
from runtime_service.safety import PatternSafetyCheck
from tests.support.fakes import FakeScheduler, lease

BODY = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}


@pytest.fixture
def overloaded() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer(overload=Overload(places=1, hold_s=600, keepalive_s=0.02))
    server.start_in_thread()
    yield server
    server.state.gate.set()
    server.shutdown()
    server.server_close()


def _open(server: ScriptedModelServer, body: Mapping[str, object]) -> http.client.HTTPResponse:
    """A chat completion request; returns once the status line and headers are in."""
    address = urlsplit(server.base_url)
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=60)
    connection.request(
        "POST",
        "/v1/chat/completions",
        json.dumps(body),
        {"Content-Type": "application/json", "Authorization": "Bearer sk-test"},
    )
    return connection.getresponse()


def _status_of_a_full_call(server: ScriptedModelServer) -> int:
    response = _open(server, BODY)
    response.read()
    return response.status


async def _occupy(server: ScriptedModelServer) -> asyncio.Future[int]:
    """A call that holds the one place until the test sets the server's gate."""
    server.state.queued.append("gate")
    call = asyncio.ensure_future(asyncio.to_thread(_status_of_a_full_call, server))

    async def occupied() -> bool:
        return bool(server.state.stats()["in_progress"] == 1)

    await eventually(occupied)
    return call


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_held_call_gets_keepalives_then_its_answer(
    overloaded: ScriptedModelServer, streaming: bool
) -> None:
    first = await _occupy(overloaded)
    held = await asyncio.to_thread(_open, overloaded, BODY | {"stream": streaming})
    assert held.status == 200  # the status goes out at once; the answer waits
    keepalive = await asyncio.to_thread(held.readline)
    assert keepalive.strip() in {b"", b": keep-alive"}
    stats = overloaded.state.stats()
    assert (stats["held"], stats["holding"], stats["in_progress"], stats["max_open"]) == (
        1,
        1,
        1,
        2,
    )
    overloaded.state.gate.set()  # the first call ends; the held one takes its place
    rest = keepalive + await asyncio.to_thread(held.read)
    assert await first == 200
    assert overloaded.state.stats()["holding"] == 0
    if streaming:
        events = [line[6:] for line in rest.split(b"\n") if line.startswith(b"data: ")]
        assert events[-1] == b"[DONE]"
        content = "".join(
            json.loads(e)["choices"][0]["delta"].get("content", "") for e in events[:-1]
        )
    else:
        content = json.loads(rest)["choices"][0]["message"]["content"]
    assert json.loads(content) == {"echo": {}}
    assert overloaded.state.stats()["max_concurrent"] == 1


async def test_a_hold_that_runs_out_ends_in_a_503_the_runtime_reads_as_temporary() -> None:
    server = ScriptedModelServer(overload=Overload(places=1, hold_s=0.05, keepalive_s=0.01))
    server.start_in_thread()
    scheduler = FakeScheduler()
    runner = JobRunner(
        scheduler, ModelConfig(server.base_url, "scripted", "sk-test"), PatternSafetyCheck([])
    )
    try:
        first = await _occupy(server)
        assert await runner.run(lease()) == "TEMPORARY_PROVIDER_ERROR"
        ((failure, _),) = scheduler.failures
        assert failure.retryable
        assert failure.internal_message.startswith("HTTP 200 with an error: Server overloaded")
        assert (server.state.stats()["overloaded"], server.state.stats()["holding"]) == (1, 0)
        server.state.gate.set()
        assert await first == 200
    finally:
        await runner.close()
        server.state.gate.set()
        server.shutdown()
        server.server_close()


async def test_the_openai_client_streams_an_answer_with_its_usage(
    model_server: ScriptedModelServer,
) -> None:
    client = openai.AsyncOpenAI(base_url=model_server.base_url, api_key="sk-test", max_retries=0)
    try:
        stream = await client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hello"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    finally:
        await client.close()
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert json.loads(content) == {"echo": {}}
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0

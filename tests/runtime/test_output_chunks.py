"""The runtime's side of partial outputs, against the scripted model over HTTP: the
answer of a type that streams goes to the scheduler in chunks as it is written, whose text is
the answer; a resumed attempt continues the earlier text with chat prefix completion on the
beta base URL (its first chunk repeats that text) and pays only for the rest; a type that does
not stream sends nothing; and the coalescing sender itself."""

from __future__ import annotations

import asyncio
import json

import pytest

from devtools.scripted_model import ScriptedModelServer
from runtime_service.leases import ModelConfig
from runtime_service.output_chunks import ChunkRefused, OutputChunks
from shared.canonical_json import canonical_json
from tests.runtime.test_pipeline import SNAPSHOT, _runner
from tests.support.fakes import FakeScheduler, lease

QUIZ_PARAMS = {"count": 3}


def _text(chunks: list[tuple[int, str]]) -> str:
    """The chunks' text, checked to be gap-free and in order."""
    end = 0
    for offset, text in chunks:
        assert offset == end
        end += len(text)
    return "".join(text for _, text in chunks)


async def test_a_streaming_answer_reaches_the_scheduler_in_chunks(
    model_server: ScriptedModelServer,
) -> None:
    model_server.state.queued.append("drip:2000")
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server, output_chunk_s=0.01)
    quiz = lease("quiz_generation", snapshot=SNAPSHOT, params=QUIZ_PARAMS, stream_output=True)
    assert await runner.run(quiz) == "succeeded"
    ((output, _),) = scheduler.results
    assert len(scheduler.chunks) >= 5
    assert canonical_json(json.loads(_text(scheduler.chunks))) == canonical_json(output)
    await runner.close()


async def test_a_resumed_attempt_continues_the_text_and_pays_for_the_rest(
    model_server: ScriptedModelServer,
) -> None:
    whole = FakeScheduler()
    runner = _runner(whole, model_server)
    quiz = lease("quiz_generation", snapshot=SNAPSHOT, params=QUIZ_PARAMS, stream_output=True)
    assert await runner.run(quiz) == "succeeded"
    text = _text(whole.chunks)
    written = text[: len(text) * 2 // 3]

    resumed = FakeScheduler()
    runner = _runner(resumed, model_server)
    second = lease(
        "quiz_generation",
        snapshot=SNAPSHOT,
        params=QUIZ_PARAMS,
        attempt_no=2,
        resume_output=written,
        stream_output=True,
    )
    assert await runner.run(second) == "succeeded"
    assert resumed.chunks[0] == (0, written)  # the earlier text, streamed again first
    assert _text(resumed.chunks) == text
    assert resumed.results[0][0] == whole.results[0][0]
    stats = model_server.state.stats()
    first_call, continuation = stats["call_completion_tokens"]
    assert continuation <= first_call // 3 + 1
    assert "prefix_without_beta" not in stats  # the continuation went to the beta base URL
    await runner.close()


async def test_a_lease_that_does_not_ask_for_the_text_gets_no_chunk(
    model_server: ScriptedModelServer,
) -> None:
    """A type that does not stream, or a scheduler that predates partial outputs (it never sets
    ``stream_output``, and would end a stream that carried a chunk): nothing is sent."""
    scheduler = FakeScheduler()
    runner = _runner(scheduler, model_server)
    assert await runner.run(lease("weak_point_analysis", snapshot=SNAPSHOT)) == "succeeded"
    quiz = lease("quiz_generation", snapshot=SNAPSHOT, params=QUIZ_PARAMS)
    assert await runner.run(quiz) == "succeeded"
    assert scheduler.chunks == [] and len(scheduler.results) == 2
    await runner.close()


async def test_text_not_taken_goes_with_the_next_chunk_and_a_refusal_stops_the_sending() -> None:
    sent: list[tuple[int, str]] = []
    answers: list[Exception | None] = [ConnectionError(), None, None, ChunkRefused("LEASE_LOST")]

    async def send(offset: int, text: str) -> None:
        answer = answers.pop(0)
        if answer is not None:
            raise answer
        sent.append((offset, text))

    chunks = OutputChunks(send, every_s=3_600, min_chars=2)
    chunks.write("ab")  # due: not taken (no stream)
    await chunks.flush()  # taken with nothing new: the same offset
    chunks.write("cd")
    await chunks.flush()
    chunks.write("ef")  # refused: nothing more goes
    await chunks.flush()
    chunks.write("gh")
    await chunks.flush()
    assert sent == [(0, "ab"), (2, "cd")]
    assert chunks.refused


async def test_small_writes_are_coalesced_until_enough_wait() -> None:
    sent: list[tuple[int, str]] = []

    async def send(offset: int, text: str) -> None:
        sent.append((offset, text))

    chunks = OutputChunks(send, every_s=3_600, min_chars=4)
    chunks.write("a")  # the first write goes at once: nothing went for a while
    await chunks.flush()
    for letter in "bcd":
        chunks.write(letter)
    await asyncio.sleep(0)  # a turn of the loop: a send could start, and must not
    assert sent == [(0, "a")]
    for letter in "efg":
        chunks.write(letter)
    await chunks.flush()
    assert sent == [(0, "a"), (1, "bcdefg")]


@pytest.mark.parametrize(
    ("base_url", "beta"),
    [
        ("https://api.deepseek.com", "https://api.deepseek.com/beta"),
        ("https://api.deepseek.com/v1/", "https://api.deepseek.com/beta"),
        ("http://127.0.0.1:8400/v1", "http://127.0.0.1:8400/beta"),
    ],
)
def test_the_prefix_completion_url_is_the_beta_one(base_url: str, beta: str) -> None:
    assert ModelConfig(base_url, "m", "k").beta_base_url == beta

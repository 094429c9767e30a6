"""Partial outputs at the protocol, on MariaDB: a runtime's OutputChunk reports are
stored with their offsets and streamed to StreamOutput callers — on another replica too — from
any offset with no gap and no duplicate; a later attempt's lease carries the text to resume
from; a chunk of a lost lease or past the attempt's bound is refused; chunks are pruned once the
job has ended."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import grpc
import pytest
from sqlalchemy import select

from devtools.harness.runtime_client import ClientRuntime, JobClient
from shared.canonical_json import canonical_json, output_hash
from shared.gen.aijob.v1 import types_pb2
from tests.runtime.test_pipeline import SNAPSHOT
from tests.support.db_checks import CHUNKS, count
from tests.support.outputs import QUIZ
from tests.support.schedulers import RunningScheduler, SchedulerFactory

pytestmark = pytest.mark.mysql

QUIZ_TEXT = json.dumps(QUIZ)


def _pieces(text: str, count: int) -> list[tuple[int, str]]:
    size = -(-len(text) // count)
    return [(start, text[start : start + size]) for start in range(0, len(text), size)]


async def _leased(
    scheduler: RunningScheduler, user: str = "user-out"
) -> tuple[ClientRuntime, types_pb2.Lease, JobClient]:
    jobs = JobClient(scheduler.channel, user)
    await jobs.create("quiz_generation", snapshot=SNAPSHOT)
    runtime = ClientRuntime(scheduler.channel, "rt-out", job_types=["quiz_generation"])
    await runtime.connect()
    runtime.credit(1)
    lease = await runtime.next_lease()
    assert lease.stream_output  # quiz_generation streams its answer
    return runtime, lease, jobs


async def _next(call: Any) -> types_pb2.OutputChunk:
    return await asyncio.wait_for(call.read(), 30)


async def test_chunks_stream_to_callers_and_a_reconnect_on_another_replica_resumes(
    scheduler: RunningScheduler, mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    replica = await start_scheduler(mysql_url)
    runtime, lease, jobs = await _leased(scheduler)
    pieces = _pieces(QUIZ_TEXT, 6)
    first = jobs.stream_output(lease.job_id)
    seen: list[types_pb2.OutputChunk] = []
    for offset, text in pieces[:3]:
        ack = await runtime.send_chunk(lease, offset, text)
        assert ack.status.code == 0, ack.status
        seen.append(await _next(first))
    assert [(c.attempt_no, c.offset, c.text) for c in seen] == [(1, o, t) for o, t in pieces[:3]]
    first.cancel()

    # Reconnect to the other replica, from the middle of the second chunk.
    resume_at = pieces[1][0] + 3
    again = JobClient(replica.channel, "user-out").stream_output(lease.job_id, resume_at)
    rest = [await _next(again)]
    assert (rest[0].offset, rest[0].text) == (resume_at, pieces[1][1][3:])
    rest.append(await _next(again))
    for offset, text in pieces[3:]:
        assert (await runtime.send_chunk(lease, offset, text)).status.code == 0
        rest.append(await _next(again))
    ack = await runtime.submit_on_stream(lease, QUIZ)
    assert ack.status.code == 0, ack.status
    assert [c async for c in again] == []  # the stream ends with the job

    text = QUIZ_TEXT[:resume_at] + "".join(c.text for c in rest)
    assert text == QUIZ_TEXT
    assert [c.offset for c in rest] == sorted({c.offset for c in rest})  # no duplicate
    assert canonical_json(json.loads(text)) == canonical_json(QUIZ)
    assert ack.result.result_idempotency_key.endswith(output_hash(json.loads(text)))
    await runtime.close()


async def test_a_repeated_chunk_is_stored_once_and_another_user_gets_not_found(
    scheduler: RunningScheduler,
) -> None:
    runtime, lease, _ = await _leased(scheduler)
    for _ in range(2):
        assert (await runtime.send_chunk(lease, 0, "{")).status.code == 0
    assert await count(scheduler.app.engine, CHUNKS, jobId=lease.job_id) == 1
    stranger = JobClient(scheduler.channel, "someone-else").stream_output(lease.job_id)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stranger.read()
    assert refused.value.code() is grpc.StatusCode.NOT_FOUND
    await runtime.close()


async def test_a_chunk_of_a_lost_lease_or_past_the_bound_is_refused(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, output_chunks_per_attempt=2)
    runtime, lease, _ = await _leased(scheduler)
    forged = types_pb2.Lease()
    forged.CopyFrom(lease)
    forged.lease_token = "not-the-token"
    lost = await runtime.send_chunk(forged, 0, "{")
    assert lost.status.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    assert (await runtime.send_chunk(lease, 0, "{")).status.code == 0
    assert (await runtime.send_chunk(lease, 1, '"q')).status.code == 0
    full = await runtime.send_chunk(lease, 3, "ue")
    assert full.status.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert await count(scheduler.app.engine, CHUNKS, jobId=lease.job_id) == 2
    await runtime.close()


@pytest.mark.parametrize(
    ("error_code", "resumed"), [("MODEL_TIMEOUT", True), ("VALIDATION_FAILED", False)]
)
async def test_the_next_attempt_continues_the_text_unless_the_text_was_wrong(
    scheduler: RunningScheduler, error_code: str, resumed: bool
) -> None:
    runtime, lease, jobs = await _leased(scheduler)
    written = QUIZ_TEXT[:40]
    for offset, text in _pieces(written, 2):
        assert (await runtime.send_chunk(lease, offset, text)).status.code == 0
    follower = jobs.stream_output(lease.job_id)
    assert [(await _next(follower)).offset for _ in range(2)] == [0, 20]
    await runtime.fail(lease, error_code, retryable=True)
    runtime.credit(1)
    second = await runtime.next_lease()
    assert second.attempt_no == 2
    assert second.resume_output == (written if resumed else "")

    # The new attempt streams from its start, with its own attempt number.
    assert (await runtime.send_chunk(second, 0, QUIZ_TEXT)).status.code == 0
    chunk = await _next(follower)
    assert (chunk.attempt_no, chunk.offset, chunk.text) == (2, 0, QUIZ_TEXT)
    await runtime.close()


async def test_chunks_are_pruned_once_the_job_has_ended(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, output_retention_s=0, reaper_interval_s=3_600)
    runtime, lease, _ = await _leased(scheduler)
    assert (await runtime.send_chunk(lease, 0, QUIZ_TEXT)).status.code == 0
    assert await scheduler.app.reaper.prune_outputs() == 0  # still running: kept
    assert (await runtime.submit_on_stream(lease, QUIZ)).status.code == 0
    assert await scheduler.app.reaper.prune_outputs() == 1
    assert await count(scheduler.app.engine, CHUNKS, jobId=lease.job_id) == 0
    await runtime.close()


async def test_an_attempts_text_is_one_run_without_gaps_or_overlapping_rows(
    scheduler: RunningScheduler,
) -> None:
    runtime, lease, _ = await _leased(scheduler)
    assert (await runtime.send_chunk(lease, 0, "abc")).status.code == 0
    gap = await runtime.send_chunk(lease, 5, "fgh")
    assert (gap.status.code, gap.status.message) == (
        grpc.StatusCode.INVALID_ARGUMENT.value[0],
        "an output chunk starts where the stored text ends (3); 5 would leave a gap",
    )
    # Sent again with what follows (its ack was lost): only the new tail is stored.
    assert (await runtime.send_chunk(lease, 1, "bcdef")).status.code == 0
    # A repeat of what is stored is answered as stored, and adds nothing.
    assert (await runtime.send_chunk(lease, 0, "abcd")).status.code == 0
    async with scheduler.app.engine.connect() as conn:
        rows = (
            await conn.execute(
                select(CHUNKS.c.startOffset, CHUNKS.c.endOffset, CHUNKS.c.text)
                .where(CHUNKS.c.jobId == lease.job_id)
                .order_by(CHUNKS.c.startOffset)
            )
        ).all()
    assert [tuple(r) for r in rows] == [(0, 3, "abc"), (3, 6, "def")]
    await runtime.close()


async def test_a_type_that_does_not_stream_stores_no_chunks(scheduler: RunningScheduler) -> None:
    await JobClient(scheduler.channel, "user-echo").create()
    runtime = ClientRuntime(scheduler.channel, "rt-echo", slots=1)
    await runtime.connect()
    lease = await runtime.next_lease()
    assert not lease.stream_output
    refused = await runtime.send_chunk(lease, 0, "text")
    assert refused.status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "does not stream its output" in refused.status.message
    assert await count(scheduler.app.engine, CHUNKS, jobId=lease.job_id) == 0
    await runtime.close()


async def test_text_past_the_bytes_bound_is_refused_and_the_next_lease_carries_the_rest(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    bound = 1024 * 1024  # the attempt's bound is the output cap (at most RESUME_BYTES)
    scheduler = await start_scheduler(mysql_url, max_output_bytes=bound)
    runtime, lease, jobs = await _leased(scheduler)
    piece = "é" * 30_000  # 60,000 bytes in 30,000 code points
    offset, stored = 0, 0
    while True:
        ack = await runtime.send_chunk(lease, offset, piece)
        if ack.status.code:
            break
        offset, stored = offset + len(piece), stored + len(piece.encode())
    assert ack.status.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert "as much output text as it may (1048576 bytes)" in ack.status.message
    assert stored <= bound < stored + len(piece.encode())
    # Another caller is answered meanwhile, and the next attempt's lease is delivered with the
    # text to resume from.
    assert (await jobs.get(lease.job_id)).lifecycle_status == "running"
    await runtime.fail(lease, "MODEL_TIMEOUT", retryable=True)
    runtime.credit(1)
    second = await runtime.next_lease()
    assert (second.attempt_no, second.resume_output) == (2, piece * (offset // len(piece)))
    await runtime.close()

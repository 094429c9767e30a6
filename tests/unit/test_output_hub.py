"""The output hub over the in-memory unit of work: however many callers follow a job,
a round costs one state statement for every followed job and one read per job whose text moved;
chunks stored on this replica reach the callers with no read; a caller from an offset gets the
rest with no gap and no duplicate; a new attempt starts again at 0; callers end with the job.
And the pure part (hypothesis): cutting a text's chunks at any offset gives exactly its rest."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from hypothesis import given
from hypothesis import strategies as st

from scheduler_service.core.output_records import ChunkRow, after_offset, written_text
from scheduler_service.ports import Transaction
from scheduler_service.services.output_hub import OutputHub
from tests.support.fake_uow import FakeUnitOfWork

T = TypeVar("T")
JOB = "job-out"


class CountingUnitOfWork(FakeUnitOfWork):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    async def read(self, query: Callable[[Transaction], Awaitable[T]]) -> T:
        self.reads += 1
        return await super().read(query)


def _job(uow: FakeUnitOfWork, status: str = "running", attempt: int = 1) -> None:
    uow.state.jobs[JOB] = {"lifecycleStatus": status, "attemptCount": attempt}


async def _store(uow: FakeUnitOfWork, *chunks: ChunkRow) -> None:
    await uow.run(lambda tx: tx.outputs.add_chunks(chunks))


async def _collect(hub: OutputHub, after: int, into: list[ChunkRow]) -> None:
    async for chunk in hub.follow(JOB, after):
        into.append(chunk)


async def _settled() -> None:
    for _ in range(5):  # the followers' tasks run up to their next wait
        await asyncio.sleep(0)


async def test_a_round_reads_a_moved_job_once_whatever_its_callers() -> None:
    uow = CountingUnitOfWork()
    _job(uow)
    await _store(uow, ChunkRow(JOB, 1, 0, "hello "))
    hub = OutputHub(uow, interval_s=3_600)
    got: list[list[ChunkRow]] = [[] for _ in range(50)]
    tasks = [asyncio.ensure_future(_collect(hub, 0, into)) for into in got]
    await _settled()
    assert uow.reads == 2  # the first caller's load (state, chunks), shared by the others
    assert all([c.text for c in into] == ["hello "] for into in got)

    await _store(uow, ChunkRow(JOB, 1, 6, "world"))  # written through another replica
    uow.reads = 0
    await hub._round()
    await _settled()
    assert uow.reads == 2  # every followed job's state, then this job's new chunk
    assert all("".join(c.text for c in into) == "hello world" for into in got)

    hub.written([ChunkRow(JOB, 1, 11, "!")])  # stored here: no read at all
    uow.reads = 0
    await _settled()
    assert uow.reads == 0 and all(into[-1].text == "!" for into in got)

    _job(uow, status="succeeded")
    await hub._round()
    await asyncio.gather(*tasks)  # every caller ends with the job
    assert hub.followed_jobs == 0


async def test_a_caller_from_an_offset_and_a_new_attempt() -> None:
    uow = CountingUnitOfWork()
    _job(uow)
    await _store(uow, ChunkRow(JOB, 1, 0, "abc"), ChunkRow(JOB, 1, 3, "def"))
    hub = OutputHub(uow, interval_s=3_600)
    got: list[ChunkRow] = []
    task = asyncio.ensure_future(_collect(hub, 4, got))
    await _settled()
    assert [(c.offset, c.text) for c in got] == [(4, "ef")]

    _job(uow, attempt=2)
    await _store(uow, ChunkRow(JOB, 2, 0, "abcdefgh"))
    await hub._round()
    await _settled()
    assert [(c.attempt_no, c.offset, c.text) for c in got][-1] == (2, 0, "abcdefgh")
    _job(uow, status="succeeded", attempt=2)
    await hub._round()
    await task


@given(st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=8), st.data())
def test_cutting_at_any_offset_gives_exactly_the_rest(parts: list[str], data: Any) -> None:
    chunks, offset = [], 0
    for part in parts:
        chunks.append(ChunkRow(JOB, 1, offset, part))
        offset += len(part)
    text = "".join(parts)
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    rest = after_offset(chunks, cut)
    assert "".join(c.text for c in rest) == text[cut:]
    assert all(c.text for c in rest) and (not rest or rest[0].offset == cut)
    assert written_text(list(reversed(chunks))) == text
    gap = data.draw(st.sampled_from(chunks))  # a chunk missing: the text stops at it
    assert written_text([c for c in chunks if c is not gap]) == text[: gap.offset]

"""One database read per job and wake-up for every StreamOutput caller on this replica.

The hub keeps, per job that has callers, its current attempt's text as far as it has read it (a
feed). Once an interval it reads the state of every followed job in one statement — status,
current attempt, where that attempt's stored text ends — and then, for each job whose text grew
or whose attempt changed, the new chunks in one read. Chunks stored through this replica are
handed to the feed as they commit, with no read at all; a job this replica changes (its end)
brings the next round forward. However many callers follow a job, they read its feed.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from scheduler_service.core.output_records import ChunkRow, FeedState, after_offset
from scheduler_service.ports import Transaction, UnitOfWork
from scheduler_service.services.loops import RoundLoop

__all__ = ["OutputHub"]

log = logging.getLogger(__name__)

#: Followed jobs per state statement.
CHUNK = 1_000


@dataclass(eq=False)
class _Feed:
    """A job's current attempt as read so far: its chunks are gap-free from offset 0."""

    state: FeedState | None = None
    chunks: list[ChunkRow] = field(default_factory=list)
    #: Set (and replaced) whenever the feed moves: its callers wait on it.
    moved: asyncio.Event = field(default_factory=asyncio.Event)
    callers: int = 0
    #: The first read, shared by the callers that arrive while it runs.
    loading: asyncio.Future[None] | None = None

    @property
    def end(self) -> int:
        return self.chunks[-1].end if self.chunks else 0

    def move(self) -> None:
        moved, self.moved = self.moved, asyncio.Event()
        moved.set()

    def take(self, state: FeedState, chunks: Sequence[ChunkRow]) -> None:
        """The job as read: a new attempt replaces the text; new chunks extend it."""
        if self.state is None or state.attempt_no != self.state.attempt_no:
            self.chunks = []
        for chunk in chunks:
            if chunk.attempt_no == state.attempt_no:
                self.extend(chunk)
        self.state = state
        self.move()

    def extend(self, chunk: ChunkRow) -> bool:
        """Add ``chunk`` when it continues the text without a gap (the part not yet held)."""
        end = self.end
        if chunk.offset > end or chunk.end <= end:
            return False
        self.chunks.extend(after_offset([chunk], end))
        return True


class OutputHub(RoundLoop):
    def __init__(self, uow: UnitOfWork, *, interval_s: float) -> None:
        super().__init__("output-hub", interval_s)
        self._uow = uow
        self._feeds: dict[str, _Feed] = {}

    @property
    def followed_jobs(self) -> int:
        return len(self._feeds)

    async def follow(self, job_id: str, after: int) -> AsyncIterator[ChunkRow]:
        """The current attempt's text after ``after``, then as it is written; a new attempt's
        from its start. Ends once the job has ended and its text has been given."""
        feed = self._feeds.setdefault(job_id, _Feed())
        feed.callers += 1
        try:
            await self._loaded(job_id, feed)
            assert feed.state is not None
            attempt, position = feed.state.attempt_no, after
            while True:
                moved = feed.moved
                state = feed.state
                if state.attempt_no != attempt:
                    attempt, position = state.attempt_no, 0
                for chunk in after_offset(feed.chunks, position):
                    yield chunk
                    position = chunk.end
                if state.terminal and position >= feed.end and not moved.is_set():
                    return
                await moved.wait()
        finally:
            feed.callers -= 1
            if feed.callers == 0 and self._feeds.get(job_id) is feed:
                del self._feeds[job_id]

    async def _loaded(self, job_id: str, feed: _Feed) -> None:
        if feed.state is not None:
            return
        if feed.loading is None:
            feed.loading = asyncio.ensure_future(self._load(job_id, feed))
        # Shielded: one caller that goes away must not cancel the others' read.
        await asyncio.shield(feed.loading)

    async def _load(self, job_id: str, feed: _Feed) -> None:
        try:
            states = await self._uow.read(functools.partial(_states_of, job_ids=[job_id]))
            state = states.get(job_id) or FeedState("succeeded", 0, 0)
            chunks = await self._read_chunks(job_id, state.attempt_no, 0) if state.end else []
            feed.take(state, chunks)
        finally:
            feed.loading = None

    def written(self, chunks: Sequence[ChunkRow]) -> None:
        """Chunks this replica stored (committed): they extend their feeds at once; one that
        does not continue its feed (a new attempt, a gap) waits for the next round's read."""
        behind = False
        for chunk in chunks:
            feed = self._feeds.get(chunk.job_id)
            if feed is None or feed.state is None:
                continue
            if chunk.attempt_no == feed.state.attempt_no and feed.extend(chunk):
                feed.state = FeedState(feed.state.status, chunk.attempt_no, feed.end)
                feed.move()
            elif chunk.attempt_no >= feed.state.attempt_no:
                behind = True
        if behind:
            self.notify()

    def touch(self, job_id: str) -> None:
        """This replica changed the job (its end, a new attempt): read it soon."""
        if job_id in self._feeds:
            self.notify()

    async def _round(self) -> None:
        ids = [job_id for job_id, feed in self._feeds.items() if feed.state is not None]
        if not ids:
            return
        # A failed read fails the round (loops.FailureStreak); the callers wait for the next.
        states = await self._read_states(ids)
        for job_id in ids:
            feed = self._feeds.get(job_id)
            state = states.get(job_id)
            if feed is None or feed.state is None or state is None or state == feed.state:
                continue
            same_attempt = state.attempt_no == feed.state.attempt_no
            start = feed.end if same_attempt else 0
            chunks = (
                await self._read_chunks(job_id, state.attempt_no, start)
                if state.end > start
                else []
            )
            feed.take(state, chunks)

    async def _read_states(self, ids: list[str]) -> dict[str, FeedState]:
        ordered = sorted(ids)
        states: dict[str, FeedState] = {}
        for start in range(0, len(ordered), CHUNK):
            states |= await self._uow.read(
                functools.partial(_states_of, job_ids=ordered[start : start + CHUNK])
            )
        return states

    async def _read_chunks(self, job_id: str, attempt_no: int, offset: int) -> list[ChunkRow]:
        return await self._uow.read(lambda tx: tx.outputs.chunks_from(job_id, attempt_no, offset))


async def _states_of(tx: Transaction, job_ids: list[str]) -> dict[str, FeedState]:
    return await tx.outputs.feed_states(job_ids)

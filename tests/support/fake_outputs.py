"""The output chunks of the fast tests' unit of work, over a dict."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from scheduler_service.core.output_records import ChunkRow, FeedState, Stored, written_text
from scheduler_service.core.state_machine import TERMINAL
from scheduler_service.ports import OutputStore
from tests.support.fake_state import FakeTables

__all__ = ["FakeOutputStore"]

TERMINAL_VALUES = {status.value for status in TERMINAL}


class FakeOutputStore(FakeTables, OutputStore):
    def _of(self, job_id: str, attempt_no: int) -> list[ChunkRow]:
        return sorted(
            (
                ChunkRow(j, a, o, text)
                for (j, a, o), text in self.state.chunks.items()
                if j == job_id and a == attempt_no
            ),
            key=lambda c: c.offset,
        )

    async def add_chunks(self, chunks: Sequence[ChunkRow]) -> None:
        for c in chunks:
            self.state.chunks.setdefault((c.job_id, c.attempt_no, c.offset), c.text)

    async def stored_text(
        self, attempts: Collection[tuple[str, int]]
    ) -> dict[tuple[str, int], Stored]:
        found: dict[tuple[str, int], Stored] = {}
        for j, a in attempts:
            chunks = self._of(j, a)
            found[(j, a)] = Stored(
                max((c.end for c in chunks), default=0),
                sum(len(c.text.encode()) for c in chunks),
                len(chunks),
            )
        return found

    async def chunks_from(self, job_id: str, attempt_no: int, offset: int) -> list[ChunkRow]:
        return [c for c in self._of(job_id, attempt_no) if c.end > offset]

    async def feed_states(self, job_ids: Sequence[str]) -> dict[str, FeedState]:
        states = {}
        for job_id in job_ids:
            row = self.state.jobs.get(job_id)
            if row is not None:
                attempt = row["attemptCount"]
                end = max((c.end for c in self._of(job_id, attempt)), default=0)
                states[job_id] = FeedState(row["lifecycleStatus"], attempt, end)
        return states

    async def earlier_text(self, job_ids: Collection[str]) -> dict[str, tuple[str | None, str]]:
        found: dict[str, tuple[str | None, str]] = {}
        for job_id in job_ids:
            row = self.state.jobs.get(job_id)
            if row is None:
                continue
            attempts = {a for (j, a, _) in self.state.chunks if j == job_id}
            earlier = [a for a in attempts if a < row["attemptCount"]]
            if earlier:
                found[job_id] = (row.get("errorCode"), written_text(self._of(job_id, max(earlier))))
        return found

    async def prune(self, retention_ms: int, *, limit: int = 500) -> int:
        ended = set()
        for job_id, _, _ in self.state.chunks:
            row = self.state.jobs.get(job_id)
            finished = row.get("finishedAt") if row else None
            ended_at = finished if row and row["lifecycleStatus"] in TERMINAL_VALUES else None
            if ended_at and (self.now - ended_at).total_seconds() * 1000 >= retention_ms:
                ended.add(job_id)
        pruned = sorted(ended)[:limit]
        for key in [k for k in self.state.chunks if k[0] in pruned]:
            del self.state.chunks[key]
        return len(pruned)

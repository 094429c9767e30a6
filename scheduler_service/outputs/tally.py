"""How many chunks each running attempt has stored, as this replica knows it: the bound on chunk
rows per attempt is checked without a count statement per chunk. An attempt's first chunk
(offset 0) starts its tally; one this replica has not seen from its start (a runtime that
reconnected here) is counted in the database once."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

__all__ = ["ChunkTally"]

Attempt = tuple[str, int]


class ChunkTally:
    def __init__(self, *, most: int, remembered: int = 100_000) -> None:
        #: Chunk rows an attempt may store.
        self.most = most
        self._remembered = remembered
        self._counts: OrderedDict[Attempt, int] = OrderedDict()

    def unknown(self, first_chunks: Iterable[tuple[Attempt, int]]) -> set[Attempt]:
        """Attempts (given with a chunk's offset) whose tally must be read from the database."""
        return {a for a, offset in first_chunks if offset > 0 and a not in self._counts}

    def known(self, counts: dict[Attempt, int]) -> None:
        for attempt, count in counts.items():
            self._set(attempt, max(count, self._counts.get(attempt, 0)))

    def room(self, attempt: Attempt) -> int:
        return self.most - self._counts.get(attempt, 0)

    def stored(self, attempts: Iterable[Attempt]) -> None:
        for attempt in attempts:
            self._set(attempt, self._counts.get(attempt, 0) + 1)

    def forget(self, job_id: str, attempt_no: int) -> None:
        self._counts.pop((job_id, attempt_no), None)

    def _set(self, attempt: Attempt, count: int) -> None:
        self._counts[attempt] = count
        self._counts.move_to_end(attempt)
        while len(self._counts) > self._remembered:
            self._counts.popitem(last=False)

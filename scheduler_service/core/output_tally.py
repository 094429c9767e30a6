"""What each running attempt has stored of its text, as this replica knows it, and whether a new
chunk may join it. Pure.

An attempt's stored text is one run from its first character: a chunk starts where the stored
text ends (a chunk sent again with what follows it, after a lost ack, adds only its new tail),
never past it, and the text stays within a bound in bytes, below what a later attempt's lease
can carry back as the text to resume from. The tally spares a read per chunk: an attempt's first
chunk (offset 0) starts it; a chunk past what this replica knows (a runtime that reconnected here
from another replica) has its attempt read from the database once."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from scheduler_service.core.errors import InvalidRequestError, LimitExceededError
from scheduler_service.core.output_records import Stored
from shared.error_codes import ErrorCode

__all__ = ["RESUME_BYTES", "ChunkTally", "new_part", "partial_output_bytes"]

Attempt = tuple[str, int]

#: The most text an attempt stores, in bytes, whatever the output cap: a later attempt's lease
#: carries it back beside the job's snapshot (up to 1 MiB by default), and a lease stays under
#: the 4 MiB a runtime receives.
RESUME_BYTES = 2 * 1024 * 1024


def partial_output_bytes(max_output_bytes: int) -> int:
    """The bound on an attempt's stored text: no more than its result may hold, nor than a
    lease can carry back."""
    return min(max_output_bytes, RESUME_BYTES)


def new_part(stored: Stored, offset: int, text: str, bounds: tuple[int, int]) -> str:
    """What of ``text``, sent at ``offset``, the attempt stores: "" for text it has already,
    the part past its end otherwise. Raises for a chunk that would leave a gap, or take the
    attempt past ``bounds``: its most bytes of text, and rows."""
    most_bytes, most_rows = bounds
    if offset > stored.end:
        raise InvalidRequestError(
            f"an output chunk starts where the stored text ends ({stored.end}); "
            f"{offset} would leave a gap",
            field="chunk.offset",
        )
    new = text[stored.end - offset :]
    if new and stored.size + len(new.encode()) > most_bytes:
        raise LimitExceededError(
            ErrorCode.QUOTA_EXCEEDED,
            f"this attempt has stored as much output text as it may ({most_bytes} bytes)",
        )
    if new and stored.rows >= most_rows:
        raise LimitExceededError(
            ErrorCode.QUOTA_EXCEEDED, "this attempt has stored as many output chunks as it may"
        )
    return new


class ChunkTally:
    def __init__(self, *, most_bytes: int, most_rows: int, remembered: int = 100_000) -> None:
        #: The UTF-8 bytes of text, and the chunk rows, an attempt may store.
        self.bounds = (most_bytes, most_rows)
        self._remembered = remembered
        self._stored: OrderedDict[Attempt, Stored] = OrderedDict()

    def unknown(self, chunks: Iterable[tuple[Attempt, int]]) -> set[Attempt]:
        """Attempts (given with a chunk's offset) whose stored text must be read from the
        database: a chunk past what this replica knows of it."""
        return {a for a, offset in chunks if offset > self.of(a).end}

    def known(self, stored: dict[Attempt, Stored]) -> None:
        for attempt, found in stored.items():
            if found.end >= self.of(attempt).end:
                self._set(attempt, found)

    def of(self, attempt: Attempt) -> Stored:
        return self._stored.get(attempt, Stored())

    def stored(self, attempt: Attempt, stored: Stored) -> None:
        if stored.end > self.of(attempt).end:
            self._set(attempt, stored)

    def forget(self, job_id: str, attempt_no: int) -> None:
        self._stored.pop((job_id, attempt_no), None)

    def _set(self, attempt: Attempt, stored: Stored) -> None:
        self._stored[attempt] = stored
        self._stored.move_to_end(attempt)
        while len(self._stored) > self._remembered:
            self._stored.popitem(last=False)

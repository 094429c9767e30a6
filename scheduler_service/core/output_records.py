"""Output chunks and what is computed from them, free of I/O: where a caller's stream resumes,
the text a later attempt continues from, and whether a previous attempt's end allows that."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from shared.error_codes import ErrorCode

__all__ = [
    "RESTART_AFTER",
    "ChunkRow",
    "FeedState",
    "Stored",
    "after_offset",
    "resumable",
    "written_text",
]


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """A piece of an attempt's text; ``offset`` counts Unicode code points from the attempt's
    first character (as Python's ``len`` and MySQL's ``CHAR_LENGTH`` do)."""

    job_id: str
    attempt_no: int
    offset: int
    text: str

    @property
    def end(self) -> int:
        return self.offset + len(self.text)


@dataclass(frozen=True, slots=True)
class Stored:
    """Where an attempt's stored text ends (in code points), its size in UTF-8 bytes and the
    rows it takes."""

    end: int = 0
    size: int = 0
    rows: int = 0

    def with_part(self, text: str) -> Stored:
        """This, and ``text`` stored at its end."""
        return Stored(self.end + len(text), self.size + len(text.encode()), self.rows + 1)


@dataclass(frozen=True, slots=True)
class FeedState:
    """What a job's output streams need to know of it: its status, its current attempt and
    where that attempt's stored text ends."""

    status: str
    attempt_no: int
    end: int

    @property
    def terminal(self) -> bool:
        return self.status in {"succeeded", "failed", "cancelled"}


def after_offset(chunks: Iterable[ChunkRow], offset: int) -> list[ChunkRow]:
    """The text after ``offset``, chunk by chunk: a chunk that straddles it is cut there, so a
    caller that read up to ``offset`` gets no character twice and none missed."""
    out: list[ChunkRow] = []
    for chunk in chunks:
        if chunk.end <= offset:
            continue
        if chunk.offset < offset:
            cut = chunk.text[offset - chunk.offset :]
            out.append(ChunkRow(chunk.job_id, chunk.attempt_no, offset, cut))
        else:
            out.append(chunk)
    return out


def written_text(chunks: Sequence[ChunkRow]) -> str:
    """The attempt's text from its first character up to the first gap (chunks in offset
    order; overlapping ones — a chunk sent again after a reconnect — add only what is new)."""
    parts: list[str] = []
    end = 0
    for chunk in sorted(chunks, key=lambda c: c.offset):
        if chunk.offset > end:
            break
        if chunk.end > end:
            parts.append(chunk.text[end - chunk.offset :])
            end = chunk.end
    return "".join(parts)


#: A previous attempt that ended with one of these wrote an answer that was wrong in itself:
#: the next attempt starts over rather than continue it.
RESTART_AFTER = frozenset(
    {
        ErrorCode.VALIDATION_FAILED,
        ErrorCode.VALIDATION_UNPARSEABLE,
        ErrorCode.MODEL_OUTPUT_TRUNCATED,
        ErrorCode.CONTENT_SAFETY_BLOCKED,
        ErrorCode.INVALID_SCHEMA,
    }
)


def resumable(previous_error_code: str | None) -> bool:
    """Whether an attempt may continue the text of the one before it: that one ended without a
    result for a reason outside its text (its runtime lost or killed, a stalled call)."""
    return previous_error_code not in RESTART_AFTER

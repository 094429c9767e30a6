"""Long-lived streams one token may hold open on this replica (issues 14 and 15): Poll, WatchJob
and SubscribeEvents, each counted per token digest; over the cap a new stream is refused
RESOURCE_EXHAUSTED (TOO_MANY_STREAMS)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from scheduler_service.core import identity
from scheduler_service.core.errors import LimitExceededError
from shared.error_codes import ErrorCode

__all__ = ["StreamCap"]


class StreamCap:
    def __init__(self, kind: str, per_token: int) -> None:
        self._kind = kind
        self._per_token = per_token
        self._open: dict[str, int] = {}

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        caller = identity.current()
        token = "" if caller is None else caller.token_key
        if self._open.get(token, 0) >= self._per_token:
            raise LimitExceededError(
                ErrorCode.TOO_MANY_STREAMS,
                f"this token holds its limit of {self._per_token} {self._kind} streams on this"
                " scheduler",
            )
        self._open[token] = self._open.get(token, 0) + 1
        try:
            yield
        finally:
            self._open[token] -= 1
            if not self._open[token]:
                del self._open[token]

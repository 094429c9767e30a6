"""One log line per key per interval at most, each saying how many it stands for: a fault that
repeats (a bad call in a loop, a database gone for minutes, a flood of refused calls) must not
flood the log. Pure but for the clock."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

__all__ = ["LogThrottle"]


class LogThrottle:
    """At most one log line per key per ``interval_s``; each admitted line says how many it
    stands for (the calls suppressed since the last one)."""

    def __init__(
        self, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._interval_s = interval_s
        self._clock = clock
        self._last: dict[Hashable, float] = {}
        self._suppressed: dict[Hashable, int] = {}

    def admit(self, key: Hashable) -> int | None:
        """None: do not log now; else log, mentioning this many suppressed before it."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._interval_s:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return None
        if len(self._last) > 10_000:  # keys are method x type: bounded, but never unbounded
            self._last.clear()
        self._last[key] = now
        return self._suppressed.pop(key, 0)

"""A background loop that runs in rounds, can be woken early, and stops between rounds; and the
one policy every loop follows when its rounds fail."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable

from scheduler_service.core.log_throttle import LogThrottle

__all__ = ["EveryInterval", "FailureStreak", "RoundLoop"]

log = logging.getLogger(__name__)

#: A failing loop writes at most one line this often (with how many rounds failed meanwhile): a
#: database without its tables once wrote a traceback per round, 44 MB in 15 minutes.
LOG_EVERY_S = 10.0
#: The longest a failing loop waits between rounds, unless its own interval is longer: after
#: the fault heals, every loop is back within this (or its interval).
MAX_ERROR_BACKOFF_S = 2.0


class FailureStreak:
    """One loop's consecutive failed rounds: how long to wait before the next round (doubling
    from the loop's interval up to :data:`MAX_ERROR_BACKOFF_S` or the interval, whichever is
    longer) and its log lines (at most one line per ``log_every_s`` with a count, the first of a
    streak with its traceback, and one line when a round succeeds again). The limit holds across
    streaks: a loop that flaps between failing and succeeding still writes one line an interval."""

    def __init__(
        self,
        name: str,
        interval_s: float,
        *,
        log_every_s: float = LOG_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._name = name
        self._interval_s = interval_s
        self._cap_s = max(interval_s, MAX_ERROR_BACKOFF_S)
        self._lines = LogThrottle(log_every_s, clock)
        self.failures = 0
        #: Whether this streak wrote a line: only then is its recovery worth one.
        self._streak_logged = False

    def failed(self, exc: BaseException) -> float:
        """Note a failed round; the wait before the next one."""
        self.failures += 1
        suppressed = self._lines.admit(self._name)
        if suppressed is not None:
            log.error(
                "%s round failed (%d since the last line): %s",
                self._name,
                suppressed + 1,
                type(exc).__name__,
                exc_info=exc if self.failures == 1 else None,
                extra={
                    "action": f"{self._name}_error",
                    "failures": self.failures,
                    "sinceLastLine": suppressed + 1,
                },
            )
            self._streak_logged = True
        return min(self._cap_s, self._interval_s * 2.0 ** min(self.failures, 30))

    def succeeded(self) -> None:
        if self.failures and self._streak_logged:
            log.warning(
                "%s recovered after %d failed rounds",
                self._name,
                self.failures,
                extra={"action": f"{self._name}_recovered", "failures": self.failures},
            )
        self.failures = 0
        self._streak_logged = False


class RoundLoop(ABC):
    """Runs ``_round`` every ``interval_s``, or at once after ``notify()``.

    With ``idle_max_s``, a round that found nothing to do (``_round`` returned False) doubles the
    wait before the next timer round, up to ``idle_max_s``; a notify or a busy round brings it back
    to ``interval_s``. An idle replica then costs a statement every few seconds, not several a
    second, while work it is told about still starts at once.

    ``stop()`` lets the round in progress finish instead of cancelling it: a cancel in the middle
    of a statement could leave its connection mid-transaction.
    """

    def __init__(
        self,
        name: str,
        interval_s: float,
        *,
        idle_max_s: float | None = None,
        at_start: bool = False,
    ) -> None:
        self._name = name
        #: The first round runs at start rather than an interval later.
        self._at_start = at_start
        self._interval_s = interval_s
        self._idle_max_s = max(interval_s, idle_max_s or interval_s)
        self._wait_s = interval_s
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._soon: asyncio.TimerHandle | None = None
        self.streak = FailureStreak(name, interval_s)
        self._halt = asyncio.Event()

    @property
    def name(self) -> str:
        return self._name

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self._name)

    async def stop(self) -> None:
        self._stopped = True
        self._halt.set()
        if self._soon is not None:
            self._soon.cancel()
        self._wake.set()
        if self._task is not None:
            _done, late = await asyncio.wait({self._task}, timeout=10)
            for task in late:
                task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def notify(self) -> None:
        """Run a round now rather than at the next tick."""
        self._wake.set()

    def notify_soon(self, delay_s: float) -> None:
        """Run a round within ``delay_s``: notifications in that window share one round."""
        if self._soon is None:
            self._soon = asyncio.get_running_loop().call_later(delay_s, self._notify_now)

    def _notify_now(self) -> None:
        self._soon = None
        self._wake.set()

    async def _run(self) -> None:
        first = self._at_start
        while not self._stopped:
            woken = True if first else await self._wait()
            first = False
            self._wake.clear()
            if self._stopped:
                return
            try:
                busy = await self._round()
            except Exception as exc:
                self._wait_s = self.streak.failed(exc)
                continue
            self.streak.succeeded()
            if woken or busy is not False:
                self._wait_s = self._interval_s
            else:
                self._wait_s = min(self._idle_max_s, self._wait_s * 2)

    async def _wait(self) -> bool:
        """Wait for the next round; True if a notify cut it short. After a failed round only a
        stop does: a failing database is not hammered by every create's notify."""
        event = self._halt if self.streak.failures else self._wake
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout=self._wait_s)
            return True
        return False

    @abstractmethod
    async def _round(self) -> bool | None:
        """One round of work. False: there was nothing to do. An exception counts as a failed
        round (:class:`FailureStreak`)."""


class EveryInterval(RoundLoop):
    """A loop whose round is a function of the app's (the reaper's sweep, the health check,
    the gauges): started, stopped and failing like every other loop."""

    def __init__(
        self,
        name: str,
        interval_s: float,
        round_: Callable[[], Awaitable[bool | None]],
        *,
        at_start: bool = False,
    ) -> None:
        super().__init__(name, interval_s, at_start=at_start)
        self._round_fn = round_

    async def _round(self) -> bool | None:
        return await self._round_fn()

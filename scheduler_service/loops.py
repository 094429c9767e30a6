"""A background loop that runs in rounds, can be woken early, and stops between rounds."""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod

__all__ = ["RoundLoop"]


class RoundLoop(ABC):
    """Runs ``_round`` every ``interval_s``, or at once after ``notify()``.

    With ``idle_max_s``, a round that found nothing to do (``_round`` returned False) doubles the
    wait before the next timer round, up to ``idle_max_s``; a notify or a busy round brings it back
    to ``interval_s``. An idle replica then costs a statement every few seconds, not several a
    second, while work it is told about still starts at once.

    ``stop()`` lets the round in progress finish instead of cancelling it: a cancel in the middle
    of a statement could leave its connection mid-transaction.
    """

    def __init__(self, name: str, interval_s: float, *, idle_max_s: float | None = None) -> None:
        self._name = name
        self._interval_s = interval_s
        self._idle_max_s = max(interval_s, idle_max_s or interval_s)
        self._wait_s = interval_s
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._soon: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self._name)

    async def stop(self) -> None:
        self._stopped = True
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
        while not self._stopped:
            woken = False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self._wait_s)
                woken = True
            self._wake.clear()
            if self._stopped:
                return
            busy = await self._round()
            if woken or busy is not False:
                self._wait_s = self._interval_s
            else:
                self._wait_s = min(self._idle_max_s, self._wait_s * 2)

    @abstractmethod
    async def _round(self) -> bool | None:
        """One round of work; it handles its own errors. False: there was nothing to do."""

"""Group commit's gathering: items that arrive together — reports, creates — are applied as one
batch, each with its own answer.

Items gather for at most ``window_s`` (or until ``max_batch`` of them wait) and each gathering is
applied with one call. At most ``max_in_flight`` batches run at once: while they do, items keep
gathering, so under load the batches grow instead of the transactions multiplying (River's
completer does the same) and each item's share of a commit shrinks. A lone item waits no longer
than the window.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["Gathering"]

T = TypeVar("T")
A = TypeVar("A")


class Gathering(Generic[T, A]):
    def __init__(
        self,
        apply: Callable[[list[T]], Awaitable[Sequence[A]]],
        *,
        window_s: float,
        max_batch: int,
        max_in_flight: int = 1,
    ) -> None:
        #: Answers a batch, one answer per item in order; what it raises fails every item.
        self._apply_batch = apply
        self._window_s = window_s
        self._max_batch = max_batch
        self._max_in_flight = max_in_flight
        self._pending: list[tuple[T, asyncio.Future[A]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._running: set[asyncio.Task[None]] = set()

    async def submit(self, item: T) -> A:
        return await self.enqueue(item)

    def enqueue(self, item: T) -> asyncio.Future[A]:
        """``item`` joins the gathering; the future is its answer (items enqueued one after
        another, as a stream's frame is, land in the same batch)."""
        future: asyncio.Future[A] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if len(self._pending) >= self._max_batch:
            self._flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._window_s, self._flush)
        return future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if len(self._running) >= self._max_in_flight:
            return  # the running batch's end starts the next one
        batch = self._pending[: self._max_batch]
        self._pending = self._pending[self._max_batch :]
        if batch:
            task = asyncio.get_running_loop().create_task(self._apply(batch))
            self._running.add(task)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if self._pending:
            self._flush()  # these have waited at least as long as the window already

    async def _apply(self, batch: list[tuple[T, asyncio.Future[A]]]) -> None:
        try:
            answers = await self._apply_batch([item for item, _ in batch])
        except Exception as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), answer in zip(batch, answers, strict=True):
            if not future.done():
                future.set_result(answer)

    async def drain(self) -> None:
        """Apply what is waiting and let running batches finish (on shutdown)."""
        self._flush()
        while self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

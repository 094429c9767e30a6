"""An attempt's text sent to the scheduler as the model writes it, coalesced: a chunk
goes when ``min_chars`` are waiting or ``every_s`` has passed since the last, one at a time
(the next waits for the previous one's ack, so a slow stream makes bigger chunks, never a
backlog). A chunk the scheduler could not take (no stream just now) is sent again with what
follows; a lost lease or a full attempt stops the sending, never the attempt: the output still
arrives whole with the result."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

__all__ = ["ChunkRefused", "OutputChunks"]

log = logging.getLogger(__name__)

#: Sends ``text`` at ``offset`` of the attempt's text; returns once the scheduler stored it.
Send = Callable[[int, str], Awaitable[None]]

#: At most this many characters in one chunk (well inside a Poll frame).
MAX_CHUNK_CHARS = 64_000


class ChunkRefused(Exception):
    """The scheduler will not take more of this attempt's text (its lease is gone, or the
    attempt stored as many chunks as it may)."""


class OutputChunks:
    def __init__(self, send: Send, *, every_s: float = 0.25, min_chars: int = 256) -> None:
        self._send = send
        self._every_s = every_s
        self._min_chars = min_chars
        #: Where the text not yet stored starts, and that text.
        self._offset = 0
        self._pending = ""
        self._sending: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._last_sent = 0.0
        self.refused = False
        self.sent = 0

    @property
    def written(self) -> int:
        """Characters written so far."""
        return self._offset + len(self._pending)

    def write(self, text: str) -> None:
        if self.refused or not text:
            return
        self._pending += text
        loop = asyncio.get_running_loop()
        due = len(self._pending) >= self._min_chars
        if due or loop.time() - self._last_sent >= self._every_s:
            self._kick()
        elif self._timer is None:
            self._timer = loop.call_at(self._last_sent + self._every_s, self._kick)

    def _kick(self) -> None:
        self._timer = None
        if self._sending is None or self._sending.done():
            self._sending = asyncio.ensure_future(self._send_pending())

    async def _send_pending(self) -> None:
        while self._pending and not self.refused:
            text = self._pending[:MAX_CHUNK_CHARS]
            self._last_sent = asyncio.get_running_loop().time()
            try:
                await self._send(self._offset, text)
            except ChunkRefused:
                self.refused = True
                return
            except Exception as exc:  # no stream just now: the text waits for the next chunk
                log.debug("output chunk not sent", extra={"error": type(exc).__name__})
                return
            self._offset += len(text)
            self._pending = self._pending[len(text) :]
            self.sent += 1
            if len(self._pending) < self._min_chars:
                if self._pending and self._timer is None:  # the rest goes on the timer
                    loop = asyncio.get_running_loop()
                    self._timer = loop.call_at(self._last_sent + self._every_s, self._kick)
                return

    async def flush(self, timeout_s: float = 5.0) -> None:
        """Everything written, stored (or given up on after ``timeout_s``): before the result
        goes, so a caller's chunks are whole when the job ends."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                if self._sending is not None:
                    await asyncio.shield(self._sending)
                if self._pending and not self.refused:
                    self._sending = asyncio.ensure_future(self._send_pending())
                    await asyncio.shield(self._sending)

    def stop(self) -> None:
        """The attempt is over without a result: send nothing more."""
        self.refused = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

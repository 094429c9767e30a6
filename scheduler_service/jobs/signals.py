"""In-process change signals: WatchJob streams wake at once when this scheduler changes a job."""

from __future__ import annotations

import asyncio
from collections import defaultdict


class ChangeSignals:
    def __init__(self) -> None:
        self._waiting: defaultdict[str, set[asyncio.Event]] = defaultdict(set)

    async def wait(self, job_id: str) -> None:
        """Return when ``touch(job_id)`` is next called (callers bound it with a timeout)."""
        event = asyncio.Event()
        self._waiting[job_id].add(event)
        try:
            await event.wait()
        finally:
            waiting = self._waiting.get(job_id)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del self._waiting[job_id]

    def touch(self, job_id: str) -> None:
        for event in self._waiting.get(job_id, ()):
            event.set()

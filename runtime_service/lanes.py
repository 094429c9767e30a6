"""Queues whose jobs run a limited number at a time on one runtime, whatever its slots: System
A's ``ai-analysis`` runs one at a time (its old worker's concurrency, ADR-003) unless
``AIJOB_RUNTIME_QUEUE_SLOTS`` says otherwise. An attempt waits for its lane inside its own
timeout and with its lease kept alive, as it would wait for the model."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping

from shared.job_types import spec_of

__all__ = ["DEFAULT_QUEUE_SLOTS", "QueueLanes"]

DEFAULT_QUEUE_SLOTS: dict[str, int] = {"ai-analysis": 1}


class QueueLanes:
    def __init__(self, slots: Mapping[str, int]) -> None:
        self._lanes = {queue: asyncio.Semaphore(n) for queue, n in slots.items()}

    @contextlib.asynccontextmanager
    async def lane(self, job_type: str) -> AsyncIterator[None]:
        spec = spec_of(job_type)
        lane = None if spec is None else self._lanes.get(spec.queue)
        if lane is None:
            yield
            return
        async with lane:
            yield

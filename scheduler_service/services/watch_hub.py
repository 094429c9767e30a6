"""One database read per interval for every job watched on this replica.

A read per WatchJob stream on its own timer would cost ~1,500 statements a second for 500 idle
watchers. The hub keeps, per watched job, the state each watcher last saw; once an interval it
reads the watched jobs' states in one statement (chunked at ``CHUNK`` ids) and wakes the
watchers whose job moved — changes made through other replicas. Changes made here wake them at
once (``touch``). Woken watchers of one job share one read of it (:meth:`WatchHub.current`), so
a progress change costs one read however many watch it; an idle watcher costs nothing.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from scheduler_service.core.records import ArtifactRow, JobRecord, WatchState
from scheduler_service.ports import Transaction, UnitOfWork
from scheduler_service.services.loops import RoundLoop

__all__ = ["WatchHub"]

log = logging.getLogger(__name__)

#: Watched job ids per statement.
CHUNK = 1_000


@dataclass(eq=False)
class _Watcher:
    seen: WatchState
    woken: asyncio.Event = field(default_factory=asyncio.Event)


class WatchHub(RoundLoop):
    def __init__(self, uow: UnitOfWork, *, interval_s: float) -> None:
        super().__init__("watch-hub", interval_s)
        self._uow = uow
        self._watchers: dict[str, set[_Watcher]] = {}
        #: Reads in flight (a job, a job's artifacts), each shared by every watcher that asks
        #: for it meanwhile.
        self._reads: dict[tuple[str, str], asyncio.Future[Any]] = {}

    @property
    def watched_jobs(self) -> int:
        return len(self._watchers)

    async def changed(self, job_id: str, seen: WatchState) -> None:
        """Return once the job's state differs from ``seen`` (as the hub reads it), or this
        replica changed the job."""
        watcher = _Watcher(seen)
        self._watchers.setdefault(job_id, set()).add(watcher)
        try:
            await watcher.woken.wait()
        finally:
            watchers = self._watchers.get(job_id)
            if watchers is not None:
                watchers.discard(watcher)
                if not watchers:
                    del self._watchers[job_id]

    async def current(self, job_id: str) -> JobRecord | None:
        """The job as it is now: one read, shared by every watcher that asks while it runs."""
        job: JobRecord | None = await self._shared(("job", job_id), _job, job_id)
        return job

    async def artifacts(self, job_id: str) -> list[ArtifactRow]:
        """A finished job's artifacts: one read, shared like :meth:`current`."""
        rows: list[ArtifactRow] = await self._shared(("artifacts", job_id), _artifacts, job_id)
        return rows

    async def _shared(
        self, key: tuple[str, str], query: Callable[..., Awaitable[Any]], job_id: str
    ) -> Any:
        pending = self._reads.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._uow.read(functools.partial(query, job_id=job_id)))
            self._reads[key] = pending
            pending.add_done_callback(functools.partial(self._read_done, key))
        # Shielded: one watcher that goes away must not cancel the others' read.
        return await asyncio.shield(pending)

    def _read_done(self, key: tuple[str, str], done: asyncio.Future[Any]) -> None:
        if self._reads.get(key) is done:
            del self._reads[key]
        if not done.cancelled():
            done.exception()  # retrieved here, whether or not a watcher is still waiting

    def touch(self, job_id: str) -> None:
        """This replica changed the job: wake its watchers now."""
        for watcher in self._watchers.get(job_id, ()):
            watcher.woken.set()

    async def _round(self) -> None:
        ids = list(self._watchers)
        if not ids:
            return
        # A failed read fails the round (loops.FailureStreak); the watchers wait for the next.
        states = await self._read_states(ids)
        for job_id in ids:
            state = states.get(job_id)
            for watcher in self._watchers.get(job_id, ()):
                if state != watcher.seen:
                    watcher.woken.set()

    async def _read_states(self, ids: Collection[str]) -> dict[str, WatchState]:
        ordered = sorted(ids)
        states: dict[str, WatchState] = {}
        for start in range(0, len(ordered), CHUNK):
            states |= await self._uow.read(
                functools.partial(_states_of, job_ids=ordered[start : start + CHUNK])
            )
        return states


async def _job(tx: Transaction, job_id: str) -> JobRecord | None:
    return await tx.reads.get(job_id)


async def _artifacts(tx: Transaction, job_id: str) -> list[ArtifactRow]:
    return await tx.results.artifacts(job_id)


async def _states_of(tx: Transaction, job_ids: list[str]) -> dict[str, WatchState]:
    return await tx.reads.watch_states(job_ids)

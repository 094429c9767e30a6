"""Reading the published event log: what SubscribeEvents streams.

Positions are ``publishedSeq``, handed out in commit order (see the dispatcher), so "everything
after position N" is a complete, stable answer: resuming after the last position seen misses
nothing and repeats nothing.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from sqlalchemy import Table, func, select

from scheduler_service.core.events import EventType
from scheduler_service.services.loops import RoundLoop
from scheduler_service.sql.db.models import AiJob, OutboxEvent
from scheduler_service.sql.uow import SqlTransaction, SqlUnitOfWork

__all__ = ["EventHub", "PublishedEvent", "latest_position"]

log = logging.getLogger(__name__)

_outbox = cast(Table, OutboxEvent.__table__)
_o = _outbox.c
_jobs = cast(Table, AiJob.__table__)
_j = _jobs.c


@dataclass(frozen=True, slots=True)
class PublishedEvent:
    position: int
    event_type: str
    job_id: str
    job_type: str
    occurred_at: datetime
    #: The job's user, so that a consumer can read the job (GetJob acting for them); empty when
    #: the job row is gone.
    user_id: str = ""


ALL_TYPES = tuple(t.value for t in EventType)
_LATEST = select(func.coalesce(func.max(_o.publishedSeq), 0))


async def latest_position(uow: SqlUnitOfWork) -> int:
    async def read(tx: SqlTransaction) -> int:
        return int((await tx.conn.execute(_LATEST)).scalar_one())

    return await uow.read(read)


async def _after(
    tx: SqlTransaction, position: int, event_types: Sequence[str], limit: int
) -> list[PublishedEvent]:
    query = (
        select(_o.publishedSeq, _o.eventType, _o.aggregateId, _o.payload, _o.createdAt, _j.userId)
        .select_from(_outbox.outerjoin(_jobs, _j.id == _o.aggregateId))
        .where(_o.publishedSeq > position, _o.eventType.in_(list(event_types)))
        .order_by(_o.publishedSeq)
        .limit(limit)
    )
    return [
        PublishedEvent(
            int(seq),
            str(kind),
            str(job_id),
            str((payload or {}).get("jobType", "")),
            created,
            user or "",
        )
        for seq, kind, job_id, payload, created, user in await tx.conn.execute(query)
    ]


@dataclass(eq=False)
class _Subscriber:
    queue: asyncio.Queue[PublishedEvent]
    #: The queue overflowed: the subscriber reads the log itself until it has caught up.
    lagging: bool = False

    def offer(self, event: PublishedEvent) -> None:
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.lagging = True

    def clear(self) -> None:
        self.lagging = False
        while not self.queue.empty():
            self.queue.get_nowait()


class EventHub(RoundLoop):
    """One read of the event log per interval for every SubscribeEvents stream of this replica,
    fanned out in memory; woken at once when this replica publishes.

    A subscriber reads the log itself only to catch up (from the position it resumes after, or
    when it fell more than ``queue_max`` events behind), then takes events from the hub.
    """

    def __init__(
        self, uow: SqlUnitOfWork, *, interval_s: float, batch: int = 500, queue_max: int = 10_000
    ) -> None:
        super().__init__("event-hub", interval_s)
        self._uow = uow
        self._batch = batch
        self._queue_max = queue_max
        self._subscribers: set[_Subscriber] = set()
        self._position: int | None = None
        self._ready = asyncio.Lock()

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    async def _subscribe(self) -> _Subscriber:
        async with self._ready:
            if self._position is None or not self._subscribers:
                # Idle until now: start from the end, not from where the last subscriber left.
                self._position = await latest_position(self._uow)
        subscriber = _Subscriber(asyncio.Queue(self._queue_max))
        self._subscribers.add(subscriber)
        return subscriber

    async def _round(self) -> None:
        if not self._subscribers or self._position is None:
            return
        # A failed read fails the round (loops.FailureStreak); subscribers wait for the next.
        while True:
            events = await self._uow.read(
                functools.partial(
                    _after, position=self._position, event_types=ALL_TYPES, limit=self._batch
                )
            )
            for event in events:
                self._position = event.position
                for subscriber in self._subscribers:
                    subscriber.offer(event)
            if len(events) < self._batch:
                return

    async def follow(
        self, after: int, event_types: Sequence[str]
    ) -> AsyncGenerator[PublishedEvent, None]:
        """Every published event of ``event_types`` after position ``after``, forever."""
        subscriber = await self._subscribe()
        wanted = frozenset(event_types)
        position = after
        try:
            catching_up = True
            while True:
                if catching_up or subscriber.lagging:
                    # Cleared before the read: whatever the hub offers from now on is kept, and
                    # the read covers everything before it (repeats are skipped by position).
                    subscriber.clear()
                    events = await self._uow.read(
                        functools.partial(
                            _after, position=position, event_types=event_types, limit=self._batch
                        )
                    )
                    for event in events:
                        position = event.position
                        yield event
                    catching_up = len(events) == self._batch
                    continue
                event = await subscriber.queue.get()
                if event.position > position and event.event_type in wanted:
                    position = event.position
                    yield event
        finally:
            self._subscribers.discard(subscriber)

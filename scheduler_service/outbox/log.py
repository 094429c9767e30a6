"""Reading the published event log: what SubscribeEvents streams.

Positions are ``publishedSeq``, handed out in commit order (see the dispatcher), so "everything
after position N" is a complete, stable answer: resuming after the last position seen misses
nothing and repeats nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from sqlalchemy import Table, func, select

from scheduler_service.db.models import OutboxEvent
from scheduler_service.uow import SqlTransaction, SqlUnitOfWork

__all__ = ["Broadcast", "PublishedEvent", "follow", "latest_position"]

_outbox = cast(Table, OutboxEvent.__table__)
_o = _outbox.c


@dataclass(frozen=True, slots=True)
class PublishedEvent:
    position: int
    event_type: str
    job_id: str
    job_type: str
    occurred_at: datetime


class Broadcast:
    """Wakes every waiter at once; waiters that arrive later wait for the next fire."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def fire(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self) -> None:
        await self._event.wait()


_LATEST = select(func.coalesce(func.max(_o.publishedSeq), 0))


async def latest_position(uow: SqlUnitOfWork) -> int:
    async def read(tx: SqlTransaction) -> int:
        return int((await tx.conn.execute(_LATEST)).scalar_one())

    return await uow.read(read)


async def _after(
    tx: SqlTransaction, position: int, event_types: Sequence[str], limit: int
) -> list[PublishedEvent]:
    query = (
        select(_o.publishedSeq, _o.eventType, _o.aggregateId, _o.payload, _o.createdAt)
        .where(_o.publishedSeq > position, _o.eventType.in_(list(event_types)))
        .order_by(_o.publishedSeq)
        .limit(limit)
    )
    return [
        PublishedEvent(
            int(seq), str(kind), str(job_id), str((payload or {}).get("jobType", "")), created
        )
        for seq, kind, job_id, payload, created in await tx.conn.execute(query)
    ]


async def follow(
    uow: SqlUnitOfWork,
    after: int,
    event_types: Sequence[str],
    *,
    poll_s: float,
    published: Callable[[], Awaitable[None]],
    batch: int = 500,
) -> AsyncIterator[PublishedEvent]:
    """Every published event of ``event_types`` after position ``after``, forever.

    Wakes when this scheduler publishes (``published``) and otherwise every ``poll_s``, which
    covers events published by other replicas.
    """
    position = after
    while True:
        events = await uow.read(
            functools.partial(_after, position=position, event_types=event_types, limit=batch)
        )
        for event in events:
            position = event.position
            yield event
        if len(events) < batch:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(published(), timeout=poll_s)

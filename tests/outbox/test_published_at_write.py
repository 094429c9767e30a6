"""An event of a type no sink takes is written published, at its position, by the transaction
that writes it (sql/outbox_writer.py); the others stay pending for the dispatcher. Positions stay
contiguous and unique however the two kinds of publication interleave, on SQLite and MariaDB."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.core.events import EventType, NewEvent
from scheduler_service.sql.db.multirow import MAX_CHUNK
from scheduler_service.sql.outbox_dispatcher import (
    ClaimedEvent,
    DispatchWaker,
    OutboxDispatcher,
    undelivered_types,
)
from scheduler_service.sql.uow import SqlTransaction, SqlUnitOfWork
from tests.support.db_checks import OUTBOX

AT_WRITE = frozenset({EventType.COMPLETED})


class EnqueueSink:
    immediate = True
    event_types: frozenset[EventType] | None = frozenset({EventType.ENQUEUE})

    async def deliver(self, event: ClaimedEvent) -> None:
        return None


def _uow(engine: AsyncEngine) -> SqlUnitOfWork:
    uow = SqlUnitOfWork(engine)
    uow.published_at_write = AT_WRITE
    return uow


async def _emit(uow: SqlUnitOfWork, events: Sequence[NewEvent]) -> None:
    async def work(tx: SqlTransaction) -> None:
        await tx.emit_many(events)

    await uow.run(work)


def _events(kind: EventType, first: int, count: int) -> list[NewEvent]:
    return [NewEvent(kind, f"job-{i}", "synthetic_echo") for i in range(first, first + count)]


async def _rows(engine: AsyncEngine) -> list[tuple[str, str, str, int | None]]:
    query = select(OUTBOX.c.aggregateId, OUTBOX.c.eventType, OUTBOX.c.status, OUTBOX.c.publishedSeq)
    async with engine.connect() as conn:
        return [tuple(row) for row in await conn.execute(query.order_by(OUTBOX.c.id))]


def test_the_types_no_sink_takes_are_published_as_written() -> None:
    waker = DispatchWaker(lambda: None, lambda _: False)
    assert undelivered_types([waker]) == {
        EventType.COMPLETED,
        EventType.FAILED,
        EventType.CANCELLED,
    }
    every = EnqueueSink()
    every.event_types = None
    assert undelivered_types([waker, every]) == frozenset()


async def test_a_completion_is_written_published_and_an_enqueue_pending(
    engine: AsyncEngine,
) -> None:
    uow = _uow(engine)
    await _emit(uow, [*_events(EventType.COMPLETED, 0, 3), *_events(EventType.ENQUEUE, 3, 2)])
    await _emit(uow, _events(EventType.COMPLETED, 5, 1))

    assert await _rows(engine) == [
        ("job-3", "ai.job.enqueue", "pending", None),
        ("job-4", "ai.job.enqueue", "pending", None),
        ("job-0", "ai.job.completed", "published", 1),
        ("job-1", "ai.job.completed", "published", 2),
        ("job-2", "ai.job.completed", "published", 3),
        ("job-5", "ai.job.completed", "published", 4),
    ]
    dispatcher = OutboxDispatcher(uow, [EnqueueSink()], instance_id="d")
    assert await dispatcher.run_once() == 2
    assert [(r[0], r[3]) for r in await _rows(engine) if r[1] == "ai.job.enqueue"] == [
        ("job-3", 5),
        ("job-4", 6),
    ]


@pytest.mark.mysql
async def test_positions_stay_contiguous_with_writers_and_dispatchers_racing(
    mysql_engine: AsyncEngine,
) -> None:
    uow = _uow(mysql_engine)
    writers, per_writer, rounds = 4, 25, 8
    dispatchers = [
        OutboxDispatcher(uow, [EnqueueSink()], instance_id=f"d{i}", batch=30) for i in range(2)
    ]

    async def writer(w: int) -> None:
        for r in range(rounds):
            first = (w * rounds + r) * per_writer
            # A transaction writes both kinds, as a group commit and a create do.
            await _emit(
                uow,
                [
                    *_events(EventType.COMPLETED, first, per_writer - 5),
                    *_events(EventType.ENQUEUE, first + per_writer - 5, 5),
                ],
            )
            await dispatchers[w % 2].run_once()

    await asyncio.gather(*(writer(w) for w in range(writers)))
    while sum([await d.run_once() for d in dispatchers]):
        pass

    rows = await _rows(mysql_engine)
    total = writers * rounds * per_writer
    assert len(rows) == total
    assert {status for _, _, status, _ in rows} == {"published"}
    assert sorted(seq for _, _, _, seq in rows if seq is not None) == list(range(1, total + 1))


async def test_more_events_than_a_statement_holds_keep_their_order(engine: AsyncEngine) -> None:
    count = 2 * MAX_CHUNK + 7
    await _emit(_uow(engine), _events(EventType.COMPLETED, 0, count))

    rows = await _rows(engine)
    assert [seq for _, _, _, seq in rows] == list(range(1, count + 1))
    assert [job for job, _, _, _ in rows] == [f"job-{i}" for i in range(count)]

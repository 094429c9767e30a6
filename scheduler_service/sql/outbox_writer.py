"""Writing outbox events inside the caller's transaction (docs/architecture.md, *The outbox*).

Payloads carry ids and routing facts only: never a user id, credential, snapshot or output.

An event of a type no sink takes has nothing to be delivered: it is written ``published``, at
its position, in the transaction that writes it, where the dispatcher would otherwise claim it
and publish it undelivered a round later. The others are written ``pending`` for the
dispatcher.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import Any, cast

from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.core.events import EventType, NewEvent, OutboxStatus
from scheduler_service.ports import OutboxStore
from scheduler_service.sql.db.models import OutboxEvent
from scheduler_service.sql.db.multirow import MAX_CHUNK, insert_rows
from scheduler_service.sql.outbox_sequence import take_positions

__all__ = ["EventType", "NewEvent", "SqlOutboxStore", "add_event", "add_events"]

_outbox = cast(Table, OutboxEvent.__table__)
_FIXED = {"aggregateType": "AiJob", "status": OutboxStatus.PENDING.value, "attemptCount": 0}
_STAMPED = ("availableAt", "createdAt")
_FIXED_PUBLISHED = {**_FIXED, "status": OutboxStatus.PUBLISHED.value}
_STAMPED_PUBLISHED = (*_STAMPED, "publishedAt")


async def add_event(
    conn: AsyncConnection,
    event_type: EventType,
    *,
    job_id: str,
    job_type: str,
    **payload: Any,
) -> None:
    """Insert one event for a job; ``dedupeKey`` is unique, so a second insert fails loudly."""
    await add_events(conn, [NewEvent(event_type, job_id, job_type, payload)])


async def add_events(
    conn: AsyncConnection, events: Sequence[NewEvent], *, published: Set[EventType] = frozenset()
) -> None:
    """Insert several events in one multi-row insert; those of the ``published`` types (no
    sink takes them) at once published, at the next positions."""
    pending = [_row(e) for e in events if e.event_type not in published]
    if pending:
        # One statement per chunk (the driver's executemany would send a statement per row),
        # sent with the transaction's next: an event's insert answers nothing but its success.
        await insert_rows(conn, _outbox, pending, stamped=_STAMPED, fixed=_FIXED, later=True)
    done = [_row(e) for e in events if e.event_type in published]
    if done:
        await _insert_published(conn, done)


async def _insert_published(conn: AsyncConnection, rows: list[dict[str, Any]]) -> None:
    """``rows`` published at the next positions, in order. The counter stays locked to commit,
    as for the dispatcher's publication, so positions follow commit order."""
    # A chunk per statement, each right after its own move of the counter: an insert sets
    # LAST_INSERT_ID() to its first row's id for the statements after it.
    for start in range(0, len(rows), MAX_CHUNK):
        chunk = rows[start : start + MAX_CHUNK]
        positions = await take_positions(conn, len(chunk))
        for index, row in enumerate(chunk):
            row["publishedSeq"] = positions.value(index)
        await insert_rows(
            conn,
            _outbox,
            chunk,
            stamped=_STAMPED_PUBLISHED,
            fixed=_FIXED_PUBLISHED,
            later=True,
            after_last_insert_id=("publishedSeq",) if positions.on_server else (),
        )


def _row(event: NewEvent) -> dict[str, Any]:
    return {
        "eventType": event.event_type.value,
        "aggregateId": event.job_id,
        "dedupeKey": f"{event.event_type.value}:{event.job_id}"
        + (f":{event.dedupe}" if event.dedupe else ""),
        "payload": {
            "jobId": event.job_id,
            "jobType": event.job_type,
            **({"parentJobId": event.parent_job_id} if event.parent_job_id else {}),
            **event.payload,
        },
    }


class SqlOutboxStore(OutboxStore):
    def __init__(self, conn: AsyncConnection, published: Set[EventType] = frozenset()) -> None:
        self._conn = conn
        #: The event types no sink takes: written published.
        self._published = published

    async def add(self, events: Sequence[NewEvent]) -> None:
        await add_events(self._conn, events, published=self._published)

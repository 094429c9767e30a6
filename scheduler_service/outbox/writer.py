"""Writing outbox events inside the caller's transaction (docs/architecture.md, *The outbox*).

Payloads carry ids and routing facts only: never a user id, credential, snapshot or output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.db.models import OutboxEvent
from scheduler_service.db.multirow import insert_rows
from scheduler_service.outbox.events import EventType, NewEvent, OutboxStatus
from scheduler_service.ports import OutboxStore

__all__ = ["EventType", "NewEvent", "SqlOutboxStore", "add_event", "add_events"]

_outbox = cast(Table, OutboxEvent.__table__)
_FIXED = {"aggregateType": "AiJob", "status": OutboxStatus.PENDING.value, "attemptCount": 0}
_STAMPED = ("availableAt", "createdAt")


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


async def add_events(conn: AsyncConnection, events: Sequence[NewEvent]) -> None:
    """Insert several events in one multi-row insert."""
    rows = [
        {
            "eventType": e.event_type.value,
            "aggregateId": e.job_id,
            "dedupeKey": f"{e.event_type.value}:{e.job_id}",
            "payload": {"jobId": e.job_id, "jobType": e.job_type, **e.payload},
        }
        for e in events
    ]
    if rows:
        # One statement per chunk (the driver's executemany would send a statement per row),
        # sent with the transaction's next: an event's insert answers nothing but its success.
        await insert_rows(conn, _outbox, rows, stamped=_STAMPED, fixed=_FIXED, later=True)


class SqlOutboxStore(OutboxStore):
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def add(self, events: Sequence[NewEvent]) -> None:
        await add_events(self._conn, events)

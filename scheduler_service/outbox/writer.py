"""Writing outbox events inside the caller's transaction (docs/architecture.md, *The outbox*).

Payloads carry ids and routing facts only: never a user id, credential, snapshot or output.
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Table, insert
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.db.clock import db_now
from scheduler_service.db.models import OutboxEvent
from scheduler_service.outbox.events import EventType, OutboxStatus

__all__ = ["EventType", "add_event"]

_outbox = cast(Table, OutboxEvent.__table__)
# Built once: every insert of an event runs the cached statement with its own parameters.
_INSERT_PENDING = insert(_outbox).values(
    aggregateType="AiJob",
    status=OutboxStatus.PENDING.value,
    attemptCount=0,
    availableAt=db_now(),
    createdAt=db_now(),
)


async def add_event(
    conn: AsyncConnection,
    event_type: EventType,
    *,
    job_id: str,
    job_type: str,
    dedupe_suffix: str = "",
    **payload: Any,
) -> None:
    """Insert one event for a job; ``dedupeKey`` is unique, so a second insert fails loudly."""
    await conn.execute(
        _INSERT_PENDING,
        {
            "eventType": event_type.value,
            "aggregateId": job_id,
            "dedupeKey": f"{event_type.value}:{job_id}{dedupe_suffix}",
            "payload": {"jobId": job_id, "jobType": job_type, **payload},
        },
    )

"""The outbox's vocabulary: event types and the states an outbox row moves through."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["EventType", "NewEvent", "OutboxStatus"]


class EventType(StrEnum):
    ENQUEUE = "ai.job.enqueue"
    COMPLETED = "ai.job.completed"
    FAILED = "ai.job.failed"
    CANCELLED = "ai.job.cancelled"


class OutboxStatus(StrEnum):
    #: Written with its job's change; waiting to be claimed (from ``availableAt`` on).
    PENDING = "pending"
    #: Claimed by one dispatcher (``lockedBy``), being delivered.
    PROCESSING = "processing"
    #: Delivered and given its ``publishedSeq``: subscribers read it. Terminal.
    PUBLISHED = "published"
    #: Delivery failed on every attempt; kept for an admin to re-drive.
    DEAD = "dead"


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to write with the change it announces; the payload holds ids and routing facts."""

    event_type: EventType
    job_id: str
    job_type: str
    payload: dict[str, Any] = field(default_factory=dict)

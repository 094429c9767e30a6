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
    #: The job's parent, when it is a child: its end moves the parent (and the payload says so).
    parent_job_id: str | None = None
    #: Told apart from the job's other events of its type (a parent's second enqueue, once its
    #: children joined); each (type, job, dedupe) is written once.
    dedupe: str = ""

    @classmethod
    def enqueue(
        cls,
        job_id: str,
        job_type: str,
        queue_name: str,
        priority: int,
        parent_job_id: str | None,
        *,
        dedupe: str = "",
    ) -> NewEvent:
        """The ``ai.job.enqueue`` of a job that became available (created, or joined)."""
        payload = {"queueName": queue_name, "priority": priority}
        return cls(EventType.ENQUEUE, job_id, job_type, payload, parent_job_id, dedupe)

"""The outbox's vocabulary: event types and the states an outbox row moves through."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["EventType", "OutboxStatus"]


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

"""The job state machine as data, with no I/O (docs/architecture.md, *The lifecycle*).

Stored states and the operations that move between them. The write table asks this module
which source states an operation may start from (the ``WHERE lifecycleStatus IN (...)`` of its
guarded UPDATE) and, when a guarded UPDATE matched nothing, which typed error explains the miss.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from scheduler_service.core.errors import (
    IllegalTransitionError,
    JobAlreadyTerminalError,
    JobLockConflictError,
    JobNotActiveError,
    JobNotCancellableError,
    LifecycleError,
)


class LifecycleStatus(StrEnum):
    #: Created or waiting for a retry; runtimes can lease it once ``availableAt`` has passed.
    QUEUED = "queued"
    #: Leased to a runtime (lockedBy, attemptCount) until ``lockUntil``.
    RUNNING = "running"
    #: A parent whose children run: it holds no lease; the last child to end joins it.
    WAITING = "waiting"
    #: A result was accepted and projected. Terminal.
    SUCCEEDED = "succeeded"
    #: Non-retryable error, retries exhausted or deadline passed. Terminal.
    FAILED = "failed"
    #: Cancelled by a user, a service or an admin. Terminal.
    CANCELLED = "cancelled"


TERMINAL: frozenset[LifecycleStatus] = frozenset(
    {LifecycleStatus.SUCCEEDED, LifecycleStatus.FAILED, LifecycleStatus.CANCELLED}
)


class Operation(StrEnum):
    """What a lifecycle write does; each names one target state."""

    LOCK = "lock"
    REQUEUE = "requeue"
    SUCCEED = "succeed"
    FAIL = "fail"
    EXPIRE = "expire"
    CANCEL = "cancel"
    #: A parent takes a child (and waits for it).
    WAIT = "wait"


@dataclass(frozen=True, slots=True)
class Transition:
    source: LifecycleStatus
    target: LifecycleStatus
    operation: Operation


Q, R, W = LifecycleStatus.QUEUED, LifecycleStatus.RUNNING, LifecycleStatus.WAITING

#: Every allowed transition, and only these. ``expire`` is the schedule-to-start
#: deadline of CreateJob (a queued job still waiting after its deadline fails with JOB_EXPIRED).
TRANSITIONS: tuple[Transition, ...] = (
    Transition(Q, R, Operation.LOCK),
    Transition(Q, LifecycleStatus.CANCELLED, Operation.CANCEL),
    Transition(Q, LifecycleStatus.FAILED, Operation.EXPIRE),
    Transition(R, LifecycleStatus.SUCCEEDED, Operation.SUCCEED),
    Transition(R, LifecycleStatus.FAILED, Operation.FAIL),
    Transition(R, Q, Operation.REQUEUE),
    Transition(R, LifecycleStatus.CANCELLED, Operation.CANCEL),
    # A parent: takes children while queued or waiting; joined once the last child ended (it
    # succeeds or fails on their outcomes, or goes back to the queue to run its own call).
    Transition(Q, W, Operation.WAIT),
    Transition(W, W, Operation.WAIT),
    Transition(W, LifecycleStatus.SUCCEEDED, Operation.SUCCEED),
    Transition(W, LifecycleStatus.FAILED, Operation.FAIL),
    Transition(W, Q, Operation.REQUEUE),
    Transition(W, LifecycleStatus.CANCELLED, Operation.CANCEL),
)

_TARGET: dict[Operation, LifecycleStatus] = {t.operation: t.target for t in TRANSITIONS}
_SOURCES: dict[Operation, frozenset[LifecycleStatus]] = {
    op: frozenset(t.source for t in TRANSITIONS if t.operation is op) for op in Operation
}
_ALLOWED: frozenset[tuple[LifecycleStatus, LifecycleStatus]] = frozenset(
    (t.source, t.target) for t in TRANSITIONS
)


class LegacyStatus(StrEnum):
    """Values of the legacy ``status`` column, which legacy readers still use."""

    PENDING = "pending"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"
    #: Written only by legacy code; read back as cancelled.
    CANCELLED = "cancelled"
    CANCEL_REQUESTED = "cancel_requested"


#: Every lifecycle write also writes the legacy ``status`` column, in the same statement, so
#: legacy readers keep working (docs/architecture.md, *The legacy status column*).
LEGACY_STATUS_OF: dict[LifecycleStatus, LegacyStatus] = {
    LifecycleStatus.QUEUED: LegacyStatus.PENDING,
    LifecycleStatus.RUNNING: LegacyStatus.PROCESSING,
    LifecycleStatus.WAITING: LegacyStatus.PROCESSING,
    LifecycleStatus.SUCCEEDED: LegacyStatus.COMPLETED,
    LifecycleStatus.FAILED: LegacyStatus.FAILED,
    LifecycleStatus.CANCELLED: LegacyStatus.FAILED,
}

#: Reverse map for rows written by legacy code (used by the upgrade migration's backfill).
LIFECYCLE_OF_LEGACY: dict[str, LifecycleStatus] = {
    LegacyStatus.PENDING: LifecycleStatus.QUEUED,
    LegacyStatus.PROCESSING: LifecycleStatus.RUNNING,
    LegacyStatus.COMPLETED: LifecycleStatus.SUCCEEDED,
    LegacyStatus.FAILED: LifecycleStatus.FAILED,
    LegacyStatus.CANCELLED: LifecycleStatus.CANCELLED,
    LegacyStatus.CANCEL_REQUESTED: LifecycleStatus.CANCELLED,
}

#: errorCode written with the legacy status when a job is cancelled: legacy readers see
#: ``failed`` + ``CANCELLED``.
LEGACY_CANCELLED_ERROR_CODE = "CANCELLED"


def parse_status(value: str) -> LifecycleStatus:
    """The stored status ``value``; ``ValueError`` for anything else."""
    return LifecycleStatus(value)


def is_terminal(status: LifecycleStatus) -> bool:
    return status in TERMINAL


def can_transition(source: LifecycleStatus, target: LifecycleStatus) -> bool:
    return (source, target) in _ALLOWED


def target_of(operation: Operation) -> LifecycleStatus:
    return _TARGET[operation]


def sources_of(operation: Operation) -> frozenset[LifecycleStatus]:
    """States ``operation`` may start from: the guard of its UPDATE."""
    return _SOURCES[operation]


def legacy_status_of(status: LifecycleStatus) -> str:
    return LEGACY_STATUS_OF[status].value


def lifecycle_of_legacy(legacy_status: str) -> LifecycleStatus:
    """The lifecycle status a legacy ``status`` value means; ``ValueError`` when unknown."""
    try:
        return LIFECYCLE_OF_LEGACY[legacy_status]
    except KeyError:
        raise ValueError(f"unknown legacy status {legacy_status!r}") from None


def check(job_id: str, current: LifecycleStatus, operation: Operation) -> LifecycleStatus:
    """The state ``operation`` leads to from ``current``, or the typed error that forbids it."""
    if current in sources_of(operation):
        return target_of(operation)
    raise rejection(job_id, current, operation)


def rejection(job_id: str, current: LifecycleStatus, operation: Operation) -> LifecycleError:
    """The typed error for ``operation`` finding the job in ``current``.

    Used both by :func:`check` and to explain a guarded UPDATE that matched no row.
    """
    if operation is Operation.CANCEL and current in TERMINAL:
        return JobNotCancellableError(job_id, current)
    if current in TERMINAL:
        return JobAlreadyTerminalError(job_id, current)
    if operation is Operation.LOCK:
        return JobLockConflictError(job_id, current)
    if current is not LifecycleStatus.RUNNING and sources_of(operation) == {R}:
        return JobNotActiveError(job_id, current)
    return IllegalTransitionError(job_id, current, target_of(operation))

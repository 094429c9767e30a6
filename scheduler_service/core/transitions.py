"""Every lifecycle write as data: which rows it may touch, what it sets, how a miss is explained.

A :class:`LifecycleWrite` is one guarded UPDATE of one job row. Its ``sources`` say from which
states it applies and under which extra guards (the fence of an attempt, the lease's grace, an
owner); ``values`` say what it sets, symbolically (the database clock, a parameter, a counter
bump) so that this module stays free of SQL. ``sql/job_statements.py`` compiles an entry into
one prebuilt UPDATE; a test's in-memory store interprets the same entries. When the UPDATE
matches no row, :func:`explain_miss` turns the row as it is now into the typed error the caller
sees. See docs/architecture.md, *The lifecycle*.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from scheduler_service.core.errors import (
    IllegalTransitionError,
    JobLockConflictError,
    JobNotCancellableError,
    JobNotFoundError,
    LeaseLostError,
    SchedulerError,
)
from scheduler_service.core.records import JobRecord
from scheduler_service.core.state_machine import (
    LEGACY_CANCELLED_ERROR_CODE,
    LifecycleStatus,
    Operation,
    legacy_status_of,
    rejection,
    sources_of,
    target_of,
)
from shared.error_codes import ErrorCode

__all__ = [
    "CANCEL",
    "CANCEL_QUEUED",
    "ERROR_VALUES",
    "EXPIRE",
    "FAIL",
    "HEARTBEAT",
    "KEEP_ALIVE",
    "LOCK",
    "RELEASE",
    "REQUEST_CANCEL",
    "REQUEUE",
    "REQUEUE_WAIVED",
    "RETIRE",
    "SUCCEED",
    "WRITES",
    "Guard",
    "LifecycleWrite",
    "Miss",
    "Now",
    "Param",
    "Plus",
    "PlusParam",
    "Source",
    "Value",
    "explain_miss",
    "one_source",
    "renew_within_ms",
]


class Guard(StrEnum):
    """A condition of a write's WHERE clause beyond ``id`` and ``lifecycleStatus``.

    Guards named in ``Source.optional`` apply only when the caller supplies them: the holder, the
    owner and the attempt as parameters, ``OVERDUE`` as the reaper's flag.
    """

    #: ``attemptCount = :attempt`` — the fence of one attempt.
    ATTEMPT = "attempt"
    #: ``lockedBy = :holder`` — the runtime instance that holds the lease.
    HOLDER = "holder"
    #: ``leaseTokenHash = :token`` — the caller presented the lease's token (its SHA-256 here).
    LEASE_TOKEN = "lease_token"
    #: ``userId = :owner`` — another user's job is "not found".
    OWNER = "owner"
    #: available now and not past the schedule-to-start deadline.
    AVAILABLE = "available"
    #: the schedule-to-start deadline has passed.
    DEADLINE_PASSED = "deadline_passed"
    #: ``attemptCount - waivedAttempts < maxAttempts``: attempts given back unspent (a 429, a
    #: runtime shutting down) do not count.
    ATTEMPTS_LEFT = "attempts_left"
    #: no cancel was requested.
    NO_CANCEL_REQUEST = "no_cancel_request"
    #: a cancel was requested.
    CANCEL_REQUESTED = "cancel_requested"
    #: the lease is not yet past ``lockUntil`` + grace.
    WITHIN_GRACE = "within_grace"
    #: the lease is past ``lockUntil`` + grace, or the attempt past its timeout + grace.
    OVERDUE = "overdue"
    #: the lease was never heartbeated (so its runtime never started on it).
    NEVER_HEARTBEATED = "never_heartbeated"
    #: ``lockUntil`` is nearer than ``b_renew_ms`` from now: a lease granted or renewed
    #: moments ago is left as it is (see :func:`renew_within_ms`).
    RENEWAL_DUE = "renewal_due"
    #: every child of a parent has ended (``childrenOpen = 0``).
    CHILDREN_DONE = "children_done"


@dataclass(frozen=True, slots=True)
class Now:
    """The database clock, plus the milliseconds in parameter ``offset`` (when named)."""

    offset: str | None = None


@dataclass(frozen=True, slots=True)
class Param:
    """The value the caller passes under ``name``; ``optional`` ones are left alone when absent."""

    name: str
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Plus:
    """The column's own value plus ``amount`` (``attemptCount + 1``)."""

    amount: int = 1


@dataclass(frozen=True, slots=True)
class PlusParam:
    """The column's own value plus the caller's parameter ``name`` (a counter moved by n)."""

    name: str


@dataclass(frozen=True, slots=True)
class KeepOrNow:
    """The column's value if set, else the database clock (``COALESCE(col, now)``)."""


Value = Now | Param | Plus | PlusParam | KeepOrNow | str | int | None


class Miss(StrEnum):
    """How a write that matched no row is explained (see :func:`explain_miss`)."""

    #: The caller only wants to know whether it applied.
    QUIET = "quiet"
    LOCK = "lock"
    LEASE = "lease"
    FENCED = "fenced"
    REQUEUE = "requeue"
    CANCEL = "cancel"
    EXPIRE = "expire"


@dataclass(frozen=True, slots=True)
class Source:
    status: LifecycleStatus
    guards: frozenset[Guard] = frozenset()
    optional: frozenset[Guard] = frozenset()


@dataclass(frozen=True, slots=True, eq=False)
class LifecycleWrite:
    """One guarded write; compared and hashed by identity (each is a module constant)."""

    name: str
    #: The transition it makes; None for writes that keep the state (heartbeat, cancel request).
    operation: Operation | None
    sources: tuple[Source, ...]
    values: Mapping[str, Value]
    miss: Miss
    #: Set by ``__post_init__``: the status columns and ``updatedAt`` of a transition.
    all_values: Mapping[str, Value] = field(init=False)

    def __post_init__(self) -> None:
        values: dict[str, Value] = {"updatedAt": Now()}
        if self.operation is not None:
            target = target_of(self.operation)
            values |= {"lifecycleStatus": target.value, "status": legacy_status_of(target)}
            allowed = sources_of(self.operation)
            if any(source.status not in allowed for source in self.sources):
                raise ValueError(f"{self.name}: a source the state machine does not allow")
        object.__setattr__(self, "all_values", MappingProxyType(values | dict(self.values)))


def one_source(
    status: LifecycleStatus, *guards: Guard, optional: tuple[Guard, ...] = ()
) -> tuple[Source]:
    return (Source(status, frozenset(guards), frozenset(optional)),)


Q, R, W = LifecycleStatus.QUEUED, LifecycleStatus.RUNNING, LifecycleStatus.WAITING
G = Guard

#: A requeued job holds no lease.
_UNLOCKED: dict[str, Value] = {
    "lockedBy": None,
    "lockedAt": None,
    "lockUntil": None,
    "lastHeartbeatAt": None,
}
ERROR_VALUES: dict[str, Value] = {
    "errorCode": Param("errorCode"),
    "publicErrorMessage": Param("publicErrorMessage"),
    "internalErrorMessage": Param("internalErrorMessage"),
}
_CANCELLED: dict[str, Value] = {
    "finishedAt": Now(),
    "lockUntil": None,
    "errorCode": LEGACY_CANCELLED_ERROR_CODE,
    "publicErrorMessage": "The job was cancelled.",
}

LOCK = LifecycleWrite(
    "lock",
    Operation.LOCK,
    one_source(Q, G.AVAILABLE),
    {
        "lockedBy": Param("lockedBy"),
        "leaseTokenHash": Param("leaseTokenHash"),
        "lockedAt": Now(),
        "lockUntil": Now("lease_ttl_ms"),
        "startedAt": Now(),
        "lastHeartbeatAt": None,
        "attemptCount": Plus(1),
    },
    Miss.LOCK,
)
HEARTBEAT = LifecycleWrite(
    "heartbeat",
    None,
    one_source(R, G.ATTEMPT, G.HOLDER, G.WITHIN_GRACE, optional=(G.LEASE_TOKEN,)),
    {
        "lockUntil": Now("lease_ttl_ms"),
        "lastHeartbeatAt": Now(),
        "progress": Param("progress", optional=True),
    },
    Miss.LEASE,
)
SUCCEED = LifecycleWrite(
    "succeed",
    Operation.SUCCEED,
    one_source(R, G.ATTEMPT, optional=(G.HOLDER,)),
    {
        "finishedAt": Now(),
        "lockUntil": None,
        "progress": 100,
        "errorCode": None,
        "publicErrorMessage": None,
        "internalErrorMessage": None,
        "outputHash": Param("outputHash"),
        "resultIdempotencyKey": Param("resultIdempotencyKey"),
        "validatedOutput": Param("validatedOutput"),
    },
    Miss.FENCED,
)
FAIL = LifecycleWrite(
    "fail",
    Operation.FAIL,
    one_source(R, G.ATTEMPT, optional=(G.HOLDER, G.OVERDUE)),
    {"finishedAt": Now(), "lockUntil": None, **ERROR_VALUES},
    Miss.FENCED,
)
REQUEUE = LifecycleWrite(
    "requeue",
    Operation.REQUEUE,
    one_source(R, G.ATTEMPT, G.ATTEMPTS_LEFT, G.NO_CANCEL_REQUEST, optional=(G.HOLDER, G.OVERDUE)),
    {**_UNLOCKED, "availableAt": Now("delay_ms"), "queuedAt": Now(), **ERROR_VALUES},
    Miss.REQUEUE,
)
#: A provider's 429 or a runtime shutting down: the attempt goes back unspent. Its number still
#: grows (fencing holds) and ``waivedAttempts`` with it, so ``maxAttempts`` is not used up; the
#: retry policy bounds how often (AIJOB_MAX_WAIVED_ATTEMPTS) and the deadline how long.
REQUEUE_WAIVED = LifecycleWrite(
    "requeue_waived",
    Operation.REQUEUE,
    one_source(R, G.ATTEMPT, G.NO_CANCEL_REQUEST, optional=(G.HOLDER, G.OVERDUE)),
    {
        **_UNLOCKED,
        "availableAt": Now("delay_ms"),
        "queuedAt": Now(),
        **ERROR_VALUES,
        "waivedAttempts": Plus(1),
    },
    Miss.REQUEUE,
)
#: A lease that never reached its runtime goes back, and its attempt with it: the next lease
#: carries the same attempt number (so users never see "attempt 4/4" on a three-attempt type) under
#: a new lease token, which fences off the given-back lease should it have reached anyone.
RELEASE = LifecycleWrite(
    "release",
    Operation.REQUEUE,
    one_source(R, G.ATTEMPT, G.HOLDER, G.NEVER_HEARTBEATED, optional=(G.LEASE_TOKEN,)),
    {**_UNLOCKED, "availableAt": Now(), "queuedAt": Now(), "attemptCount": Plus(-1)},
    Miss.QUIET,
)
#: From queued at once, or from running once a cancel was requested (and, with an attempt, only
#: while that attempt holds it). Legacy readers see ``status='failed'`` with ``CANCELLED``.
CANCEL = LifecycleWrite(
    "cancel",
    Operation.CANCEL,
    (
        Source(Q),
        Source(R, frozenset({G.CANCEL_REQUESTED}), frozenset({G.ATTEMPT, G.OVERDUE})),
    ),
    _CANCELLED,
    Miss.CANCEL,
)
#: A user's or an admin's cancel of a queued job, or of a waiting parent (its descendants are
#: cancelled in the same transaction).
CANCEL_QUEUED = LifecycleWrite(
    "cancel_queued",
    Operation.CANCEL,
    (Source(Q, frozenset(), frozenset({G.OWNER})), Source(W, frozenset(), frozenset({G.OWNER}))),
    _CANCELLED,
    Miss.QUIET,
)
#: A cancel request on a running job: its runtime is told and stops.
REQUEST_CANCEL = LifecycleWrite(
    "request_cancel",
    None,
    one_source(R, optional=(G.OWNER,)),
    {"cancelRequestedAt": KeepOrNow()},
    Miss.QUIET,
)
#: A Poll stream that is alive keeps every lease of its runtime alive: one statement per replica
#: per interval, whatever the number of leases (compiled over ``lockedBy IN (...)``). Only the
#: leases due for renewal are written: short jobs come and go between two rounds, and a row
#: written for nothing is a row every database replica applies too.
KEEP_ALIVE = LifecycleWrite(
    "keep_alive",
    None,
    one_source(R, G.WITHIN_GRACE, G.RENEWAL_DUE),
    {"lockUntil": Now("lease_ttl_ms")},
    Miss.QUIET,
)
EXPIRE = LifecycleWrite(
    "expire",
    Operation.EXPIRE,
    one_source(Q, G.DEADLINE_PASSED),
    {
        "finishedAt": Now(),
        "errorCode": ErrorCode.JOB_EXPIRED.value,
        "publicErrorMessage": "The job was not started before its deadline.",
    },
    Miss.EXPIRE,
)
#: A queued job whose type is no longer registered: no runtime may take it, so it ends as failed
#: at once (the reaper finds it) instead of counting against its user's cap for ever.
RETIRE = LifecycleWrite(
    "retire",
    Operation.EXPIRE,
    one_source(Q),
    {"finishedAt": Now(), "lockUntil": None, **ERROR_VALUES},
    Miss.QUIET,
)

WRITES: tuple[LifecycleWrite, ...] = (
    LOCK,
    HEARTBEAT,
    SUCCEED,
    FAIL,
    REQUEUE,
    REQUEUE_WAIVED,
    RELEASE,
    CANCEL,
    CANCEL_QUEUED,
    REQUEST_CANCEL,
    KEEP_ALIVE,
    EXPIRE,
    RETIRE,
)


def renew_within_ms(ttl_ms: int) -> int:
    """KEEP_ALIVE renews a lease with less than this left: all but the freshest sixth of a TTL.

    The keeper runs every third of a TTL. After a round every lease it covers has at least five
    sixths of a TTL left (renewed, or left for being fresher), so at the next round at least half,
    and after a missed round still a sixth: one missed round costs no lease, as when every
    round renewed everything (which left a third after a missed round)."""
    return ttl_ms - ttl_ms // 6


def explain_miss(
    write: LifecycleWrite,
    job_id: str,
    job: JobRecord | None,
    params: Mapping[str, Any],
) -> SchedulerError | None:
    """The typed error for ``write`` having matched no row, given the row as it is now.

    ``params`` are the write's parameters (``attempt``, ``holder``...). None for a quiet write.
    """
    if write.miss is Miss.QUIET:
        return None
    if job is None:
        return JobNotFoundError(job_id)
    return _EXPLAIN[write.miss](write, job, params.get("attempt"), params.get("holder"))


Explainer = Callable[[LifecycleWrite, JobRecord, "int | None", "str | None"], SchedulerError]


def _lock_miss(
    _w: LifecycleWrite, job: JobRecord, _a: int | None, _h: str | None
) -> SchedulerError:
    if job.lifecycleStatus is Q:
        why = "its deadline has passed" if job.deadlineAt else "it is waiting for a retry"
        return JobLockConflictError(job.id, job.lifecycleStatus, why)
    return rejection(job.id, job.lifecycleStatus, Operation.LOCK)


def _lease_miss(
    _w: LifecycleWrite, job: JobRecord, attempt: int | None, _h: str | None
) -> SchedulerError:
    return LeaseLostError(job.id, attempt or 0, job.lifecycleStatus)


def _fenced_miss(
    write: LifecycleWrite, job: JobRecord, attempt: int | None, holder: str | None
) -> SchedulerError:
    assert write.operation is not None and attempt is not None
    stale = job.attemptCount != attempt or (holder is not None and job.lockedBy != holder)
    if stale or job.lifecycleStatus is Q:
        return LeaseLostError(job.id, attempt, job.lifecycleStatus)
    if job.lifecycleStatus not in sources_of(write.operation):
        return rejection(job.id, job.lifecycleStatus, write.operation)
    # Right state, right attempt, yet no match: the lease is past its grace period.
    return LeaseLostError(job.id, attempt, job.lifecycleStatus)


def _requeue_miss(
    write: LifecycleWrite, job: JobRecord, attempt: int | None, holder: str | None
) -> SchedulerError:
    if attempt is not None and holds_lease(job, attempt, holder):
        why = "a cancel was requested" if job.cancelRequestedAt else "no attempts are left"
        return IllegalTransitionError(job.id, job.lifecycleStatus, Q, why)
    return _fenced_miss(write, job, attempt, holder)


def _cancel_miss(
    _w: LifecycleWrite, job: JobRecord, attempt: int | None, _h: str | None
) -> SchedulerError:
    if job.is_terminal:
        return JobNotCancellableError(job.id, job.lifecycleStatus)
    if attempt is not None and job.attemptCount != attempt:
        return LeaseLostError(job.id, attempt, job.lifecycleStatus)
    return IllegalTransitionError(
        job.id, job.lifecycleStatus, LifecycleStatus.CANCELLED, "no cancel was requested"
    )


def _expire_miss(
    _w: LifecycleWrite, job: JobRecord, _a: int | None, _h: str | None
) -> SchedulerError:
    if job.lifecycleStatus is Q:
        return IllegalTransitionError(job.id, Q, LifecycleStatus.FAILED, "deadline not passed")
    return rejection(job.id, job.lifecycleStatus, Operation.EXPIRE)


_EXPLAIN: dict[Miss, Explainer] = {
    Miss.LOCK: _lock_miss,
    Miss.LEASE: _lease_miss,
    Miss.FENCED: _fenced_miss,
    Miss.REQUEUE: _requeue_miss,
    Miss.CANCEL: _cancel_miss,
    Miss.EXPIRE: _expire_miss,
}


def holds_lease(
    job: JobRecord, attempt_no: int, holder: str | None, token_hash: str | None = None
) -> bool:
    """Whether ``attempt_no`` (of ``holder``, when named, proven by the digest of its lease
    token, when given) holds the job's lease now.

    An attempt is leased once and its token never changes while it runs, so a token checked
    against the row at any moment of the attempt proves the caller holds that attempt."""
    return (
        job.lifecycleStatus is R
        and job.attemptCount == attempt_no
        and (holder is None or job.lockedBy == holder)
        and (token_hash is None or job.leaseTokenHash == token_hash)
    )

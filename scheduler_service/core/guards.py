"""The write table's guards judged in Python, on a row as read: what the in-memory store runs for
every write, and what a group commit asks of a row it locked (a heartbeat judged before its
set-based write). The SQL store compiles the same guards (``sql/job_statements.py``); a guard is
declared once, in the write table (``core/transitions.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scheduler_service.core.records import RECORD_FIELDS, JobRecord
from scheduler_service.core.transitions import Guard, LifecycleWrite, renew_within_ms

__all__ = ["GUARD_PARAMS", "Moment", "holds", "matches", "row_of"]

#: The write parameters that switch an optional guard on when the caller passes them.
GUARD_PARAMS = {
    "attempt": Guard.ATTEMPT,
    "holder": Guard.HOLDER,
    "token": Guard.LEASE_TOKEN,
    "owner": Guard.OWNER,
}


@dataclass(frozen=True, slots=True)
class Moment:
    """The database's now and the lease times a guard is judged with."""

    now: datetime
    ttl_ms: int
    grace_ms: int


def row_of(job: JobRecord) -> dict[str, Any]:
    """A job record as a row: the columns by name, the status as stored."""
    row = {name: getattr(job, name) for name in RECORD_FIELDS}
    row["lifecycleStatus"] = job.lifecycleStatus.value
    return row


def matches(
    write: LifecycleWrite,
    row: Mapping[str, Any],
    params: Mapping[str, Any],
    at: Moment,
    *,
    overdue_only: bool = False,
) -> bool:
    """Whether ``write`` with ``params`` matches ``row`` at ``at`` (as its UPDATE would)."""
    active = {GUARD_PARAMS[k] for k, v in params.items() if k in GUARD_PARAMS and v is not None}
    if overdue_only:
        active.add(Guard.OVERDUE)
    return any(
        row["lifecycleStatus"] == source.status.value
        and all(holds(g, row, params, at) for g in source.guards | (source.optional & active))
        for source in write.sources
    )


def holds(guard: Guard, row: Mapping[str, Any], params: Mapping[str, Any], at: Moment) -> bool:  # noqa: PLR0911
    match guard:
        case Guard.ATTEMPT:
            return bool(row["attemptCount"] == params["attempt"])
        case Guard.HOLDER:
            return bool(row["lockedBy"] == params["holder"])
        case Guard.LEASE_TOKEN:
            return bool(row["leaseTokenHash"] == params["token"])
        case Guard.OWNER:
            return bool(row["userId"] == params["owner"])
        case Guard.AVAILABLE:
            deadline = row["deadlineAt"]
            return bool(row["availableAt"] <= at.now and (deadline is None or deadline > at.now))
        case Guard.DEADLINE_PASSED:
            return row["deadlineAt"] is not None and row["deadlineAt"] <= at.now
        case Guard.ATTEMPTS_LEFT:
            return bool(row["attemptCount"] - row["waivedAttempts"] < row["maxAttempts"])
        case Guard.NO_CANCEL_REQUEST:
            return row["cancelRequestedAt"] is None
        case Guard.CANCEL_REQUESTED:
            return row["cancelRequestedAt"] is not None
        case Guard.NEVER_HEARTBEATED:
            return row["lastHeartbeatAt"] is None
        case Guard.CHILDREN_DONE:
            return bool(row["childrenOpen"] == 0)
    return _lease_time_holds(guard, row, at)


def _lease_time_holds(guard: Guard, row: Mapping[str, Any], at: Moment) -> bool:
    lock_until = row["lockUntil"]
    if lock_until is None:
        return False
    grace = timedelta(milliseconds=at.grace_ms)
    match guard:
        case Guard.WITHIN_GRACE:
            return bool(lock_until >= at.now - grace)
        case Guard.OVERDUE:
            timeout = timedelta(milliseconds=row["timeoutMs"])
            return bool(
                lock_until < at.now - grace or row["startedAt"] < at.now - (timeout + grace)
            )
        case Guard.RENEWAL_DUE:
            return bool(lock_until < at.now + timedelta(milliseconds=renew_within_ms(at.ttl_ms)))
    raise AssertionError(guard)

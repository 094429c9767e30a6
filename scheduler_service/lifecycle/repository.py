"""The lifecycle repository: the only code that writes ``lifecycleStatus``.

Every write is one guarded UPDATE (``WHERE id = ? AND lifecycleStatus IN (...) [AND attemptCount =
? AND lockedBy = ?]``) whose matched-row count is checked; there is no read-then-write. The legacy
``status`` column is written in the same statement. When a guarded UPDATE matches nothing, the row
is read afterwards only to choose the typed error that explains why.

Times come from the database clock (:func:`db_now`). Methods that take ``conn`` run inside the
caller's transaction (so a projection, the state change and its outbox event commit together);
without it they run in their own transaction, re-run on deadlock or lock-wait timeout.

``tests/test_lifecycle_single_writer.py`` fails the build if any other module writes
``lifecycleStatus``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeVar, cast

from sqlalchemy import (
    ColumnElement,
    Table,
    Update,
    and_,
    bindparam,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from scheduler_service.db.clock import db_now
from scheduler_service.db.models import AiJob
from scheduler_service.db.retry import run_transaction
from scheduler_service.errors import (
    IllegalTransitionError,
    JobLockConflictError,
    JobNotCancellableError,
    JobNotFoundError,
    LeaseLostError,
    LifecycleError,
)
from scheduler_service.lifecycle.state_machine import (
    LEGACY_CANCELLED_ERROR_CODE,
    LifecycleStatus,
    Operation,
    is_terminal,
    legacy_status_of,
    parse_status,
    rejection,
    sources_of,
    target_of,
)

__all__ = [
    "CancelOutcome",
    "ExpiredLease",
    "HeartbeatOutcome",
    "JobError",
    "JobRecord",
    "LeaseGrant",
    "LifecycleRepository",
    "NewJob",
]

T = TypeVar("T")
CancelOutcome = Literal["cancelled", "cancel_requested"]

_job = cast(Table, AiJob.__table__)
_c = _job.c

#: Bytes of heartbeat checkpoint kept for the next attempt.
MAX_CHECKPOINT_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class NewJob:
    """A job to insert as queued; values come from the job definition and the request."""

    job_id: str
    user_id: str
    job_type: str
    queue_name: str
    priority: int
    max_attempts: int
    timeout_ms: int
    target_type: str | None = None
    target_id: str | None = None
    idempotency_key: str | None = None
    request_hash: str | None = None
    trigger_type: str = "api"
    parent_job_id: str | None = None
    retried_from_job_id: str | None = None
    credential_mode: str = "platform_key"
    credential_id: str | None = None
    model_name: str = "deepseek-chat"
    prompt_key: str | None = None
    prompt_version: str | None = None
    input_schema_version: str | None = None
    output_schema_version: str | None = None
    snapshot_id: str | None = None
    deadline_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class JobError:
    """Error fields of a failure: a catalogue code, a user-safe text, an operator text."""

    code: str
    public_message: str
    internal_message: str | None = None


@dataclass(frozen=True, slots=True)
class LeaseGrant:
    job_id: str
    attempt_no: int
    lock_until: datetime
    checkpoint: bytes | None
    #: From the job becoming available to this lease, by the database clock.
    waited_s: float = 0.0


@dataclass(frozen=True, slots=True)
class HeartbeatOutcome:
    lock_until: datetime
    cancel_requested: bool


@dataclass(frozen=True, slots=True)
class ExpiredLease:
    """A running attempt whose lease ran out, or that ran past its job type's timeout."""

    job_id: str
    job_type: str
    attempt_no: int
    max_attempts: int
    cancel_requested: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRecord:
    """A job row as the rest of the scheduler reads it."""

    id: str
    userId: str
    jobType: str
    lifecycleStatus: LifecycleStatus
    status: str
    queueName: str
    priority: int
    progress: int
    attemptCount: int
    maxAttempts: int
    timeoutMs: int
    lockedBy: str | None
    lockedAt: datetime | None
    lockUntil: datetime | None
    availableAt: datetime | None
    deadlineAt: datetime | None
    cancelRequestedAt: datetime | None
    queuedAt: datetime | None
    startedAt: datetime | None
    finishedAt: datetime | None
    createdAt: datetime
    updatedAt: datetime
    targetType: str | None
    targetId: str | None
    idempotencyKey: str | None
    requestHash: str | None
    retriedFromJobId: str | None
    errorCode: str | None
    publicErrorMessage: str | None
    internalErrorMessage: str | None
    outputHash: str | None
    validatedOutput: Any
    resultIdempotencyKey: str | None
    credentialMode: str
    credentialId: str | None
    modelName: str
    promptKey: str | None
    promptVersion: str | None
    outputSchemaVersion: str | None
    checkpoint: bytes | None

    @classmethod
    def from_row(cls, row: Row[Any]) -> JobRecord:
        values = {f.name: row._mapping[f.name] for f in dataclasses.fields(cls)}
        values["lifecycleStatus"] = parse_status(values["lifecycleStatus"])
        return cls(**values)

    @property
    def is_terminal(self) -> bool:
        return is_terminal(self.lifecycleStatus)


_RECORD_COLUMNS = [_c[f.name] for f in dataclasses.fields(JobRecord)]


def _transition_values(target: LifecycleStatus) -> dict[str, Any]:
    """The SET clause every transition shares: both status columns and ``updatedAt``."""
    return {
        "lifecycleStatus": target.value,
        "status": legacy_status_of(target),
        "updatedAt": db_now(),
    }


_GRANT_COLUMNS = [_c.id, _c.attemptCount, _c.lockUntil, _c.checkpoint, _c.lockedAt, _c.availableAt]


def _grant(row: Row[Any]) -> LeaseGrant:
    waited = (row.lockedAt - row.availableAt).total_seconds() if row.availableAt else 0.0
    return LeaseGrant(row.id, row.attemptCount, row.lockUntil, row.checkpoint, max(0.0, waited))


def _status_in(statuses: Iterable[LifecycleStatus]) -> ColumnElement[bool]:
    return _c.lifecycleStatus.in_(sorted(s.value for s in statuses))


# Hot statements are built once, with bind parameters for what varies: building a statement costs
# several times what executing a cached one does (see docs/performance.md).
_SELECT_RECORD = select(*_RECORD_COLUMNS).where(_c.id == bindparam("b_id"))
_INSERT_QUEUED = insert(_job).values(
    lifecycleStatus=LifecycleStatus.QUEUED.value,
    status=legacy_status_of(LifecycleStatus.QUEUED),
    progress=0,
    attemptCount=0,
    queuedAt=db_now(),
    availableAt=db_now(),
    createdAt=db_now(),
    updatedAt=db_now(),
)


_SELECT_CLAIMABLE = (
    select(_c.id)
    .where(
        _status_in(sources_of(Operation.LOCK)),
        _c.jobType.in_(bindparam("b_types", expanding=True)),
        _c.availableAt <= db_now(),
        or_(_c.deadlineAt.is_(None), _c.deadlineAt > db_now()),
    )
    .order_by(_c.priority, _c.createdAt, _c.id)
    .limit(bindparam("b_limit"))
    .with_for_update(skip_locked=True)
)
_SELECT_GRANTS = select(*_GRANT_COLUMNS).where(_c.id.in_(bindparam("b_ids", expanding=True)))


@functools.cache
def _succeed_statement(*, fenced_by_holder: bool) -> Update:
    """running → succeeded for attempt ``b_attempt`` (held by ``b_holder`` when fenced); the
    output columns come as parameters."""
    guard = [
        _c.id == bindparam("b_id"),
        _c.lifecycleStatus == LifecycleStatus.RUNNING.value,
        _c.attemptCount == bindparam("b_attempt"),
    ]
    if fenced_by_holder:
        guard.append(_c.lockedBy == bindparam("b_holder"))
    return (
        update(_job)
        .where(*guard)
        .values(
            **_transition_values(target_of(Operation.SUCCEED)),
            finishedAt=db_now(),
            lockUntil=None,
            progress=100,
            errorCode=None,
            publicErrorMessage=None,
            internalErrorMessage=None,
        )
    )


#: A requeued job holds no lease.
_UNLOCKED: dict[str, Any] = {
    "lockedBy": None,
    "lockedAt": None,
    "lockUntil": None,
    "lastHeartbeatAt": None,
}


def _holds_lease(job: JobRecord, attempt_no: int, runtime_instance_id: str | None) -> bool:
    return (
        job.lifecycleStatus is LifecycleStatus.RUNNING
        and job.attemptCount == attempt_no
        and (runtime_instance_id is None or job.lockedBy == runtime_instance_id)
    )


class LifecycleRepository:
    """Lifecycle writes and reads on the job table."""

    def __init__(
        self, engine: AsyncEngine, *, lease_ttl_s: float = 60.0, lease_grace_s: float = 30.0
    ) -> None:
        self._engine = engine
        self._lease_ttl_ms = round(lease_ttl_s * 1000)
        self._lease_grace_ms = round(lease_grace_s * 1000)

    # -- plumbing ---------------------------------------------------------------------------

    async def _in_transaction(
        self, conn: AsyncConnection | None, unit: Callable[[AsyncConnection], Awaitable[T]]
    ) -> T:
        if conn is not None:
            return await unit(conn)
        return await run_transaction(self._engine, unit)

    async def _read(self, conn: AsyncConnection, job_id: str) -> JobRecord | None:
        row = (await conn.execute(_SELECT_RECORD, {"b_id": job_id})).first()
        return None if row is None else JobRecord.from_row(row)

    async def _guarded_update(
        self,
        conn: AsyncConnection,
        job_id: str,
        guard: Sequence[ColumnElement[bool]],
        values: dict[str, Any],
    ) -> bool:
        result = await conn.execute(update(_job).where(_c.id == job_id, *guard).values(values))
        # MySQL dialects connect with CLIENT_FOUND_ROWS, so this counts matched rows, not changed
        # ones: a write that leaves a row as it was still reports 1 (reliability S16).
        return result.rowcount == 1

    async def _explain(
        self,
        conn: AsyncConnection,
        job_id: str,
        operation: Operation,
        *,
        attempt_no: int | None = None,
        runtime_instance_id: str | None = None,
    ) -> LifecycleError | JobNotFoundError:
        """The typed error for a guarded UPDATE of ``operation`` that matched no row."""
        job = await self._read(conn, job_id)
        if job is None:
            return JobNotFoundError(job_id)
        if attempt_no is not None and (
            job.attemptCount != attempt_no
            or (runtime_instance_id is not None and job.lockedBy != runtime_instance_id)
            or job.lifecycleStatus is LifecycleStatus.QUEUED
        ):
            return LeaseLostError(job_id, attempt_no, job.lifecycleStatus)
        if job.lifecycleStatus not in sources_of(operation):
            return rejection(job_id, job.lifecycleStatus, operation)
        if attempt_no is not None:
            # Right state, right attempt, yet no match: the lease is past its grace period.
            return LeaseLostError(job_id, attempt_no, job.lifecycleStatus)
        return IllegalTransitionError(job_id, job.lifecycleStatus, target_of(operation))

    def _fence(
        self, attempt_no: int, runtime_instance_id: str | None, *, overdue_only: bool = False
    ) -> list[ColumnElement[bool]]:
        """The guard of a write by (or on behalf of) the holder of one attempt's lease.

        ``overdue_only`` is the reaper's: the write applies only while the lease is still past
        its grace (or the attempt past its timeout), so a heartbeat that lands first wins.
        """
        guard = [_c.lifecycleStatus == LifecycleStatus.RUNNING.value, _c.attemptCount == attempt_no]
        if runtime_instance_id is not None:
            guard.append(_c.lockedBy == runtime_instance_id)
        if overdue_only:
            guard.append(self._overdue())
        return guard

    def _overdue(self) -> ColumnElement[bool]:
        grace = self._lease_grace_ms
        return or_(
            _c.lockUntil < db_now(-grace),
            _c.startedAt < db_now(-(_c.timeoutMs + grace)),
        )

    # -- create -----------------------------------------------------------------------------

    async def create(self, conn: AsyncConnection, job: NewJob) -> None:
        """Insert ``job`` as queued, inside the caller's transaction (with snapshot and outbox)."""
        await conn.execute(
            _INSERT_QUEUED,
            {
                "id": job.job_id,
                "userId": job.user_id,
                "jobType": job.job_type,
                "triggerType": job.trigger_type,
                "queueName": job.queue_name,
                "targetType": job.target_type,
                "targetId": job.target_id,
                "parentJobId": job.parent_job_id,
                "idempotencyKey": job.idempotency_key,
                "requestHash": job.request_hash,
                "retriedFromJobId": job.retried_from_job_id,
                "priority": job.priority,
                "maxAttempts": job.max_attempts,
                "timeoutMs": job.timeout_ms,
                "credentialMode": job.credential_mode,
                "credentialId": job.credential_id,
                "modelName": job.model_name,
                "promptKey": job.prompt_key,
                "promptVersion": job.prompt_version,
                "inputSchemaVersion": job.input_schema_version,
                "outputSchemaVersion": job.output_schema_version,
                "snapshotId": job.snapshot_id,
                "deadlineAt": job.deadline_at,
            },
        )

    # -- running ----------------------------------------------------------------------------

    async def lock(self, job_id: str, runtime_instance_id: str) -> LeaseGrant:
        """CAS queued → running for ``runtime_instance_id``, if the job is available now."""

        async def unit(conn: AsyncConnection) -> LeaseGrant:
            now = db_now()
            guard = [
                _status_in(sources_of(Operation.LOCK)),
                _c.availableAt <= now,
                or_(_c.deadlineAt.is_(None), _c.deadlineAt > now),
            ]
            if await self._guarded_update(
                conn, job_id, guard, self._lock_values(runtime_instance_id)
            ):
                return await self._lease_of(conn, job_id, runtime_instance_id)
            job = await self._read(conn, job_id)
            if job is None:
                raise JobNotFoundError(job_id)
            if job.lifecycleStatus is LifecycleStatus.QUEUED:
                reason = (
                    "its deadline has passed" if job.deadlineAt else "it is waiting for a retry"
                )
                raise JobLockConflictError(job_id, job.lifecycleStatus, reason)
            raise rejection(job_id, job.lifecycleStatus, Operation.LOCK)

        return await run_transaction(self._engine, unit)

    def _lock_values(self, runtime_instance_id: str) -> dict[str, Any]:
        return {
            **_transition_values(target_of(Operation.LOCK)),
            "lockedBy": runtime_instance_id,
            "lockedAt": db_now(),
            "lockUntil": db_now(self._lease_ttl_ms),
            "startedAt": db_now(),
            "lastHeartbeatAt": None,
            "attemptCount": _c.attemptCount + 1,
        }

    async def _lease_of(
        self, conn: AsyncConnection, job_id: str, runtime_instance_id: str
    ) -> LeaseGrant:
        row = (
            await conn.execute(
                select(*_GRANT_COLUMNS).where(_c.id == job_id, _c.lockedBy == runtime_instance_id)
            )
        ).one()
        return _grant(row)

    async def extend_lease(
        self,
        job_id: str,
        attempt_no: int,
        runtime_instance_id: str,
        *,
        progress: int | None = None,
        checkpoint: bytes | None = None,
    ) -> HeartbeatOutcome:
        """Extend the lease of the holder (same instance and attempt) to now + lease TTL.

        A lease past ``lockUntil`` + grace is lost even before the reaper takes it back.
        """
        if checkpoint is not None and len(checkpoint) > MAX_CHECKPOINT_BYTES:
            raise ValueError(f"checkpoint larger than {MAX_CHECKPOINT_BYTES} bytes")

        async def unit(conn: AsyncConnection) -> HeartbeatOutcome:
            values: dict[str, Any] = {
                "lockUntil": db_now(self._lease_ttl_ms),
                "lastHeartbeatAt": db_now(),
                "updatedAt": db_now(),
            }
            if progress is not None:
                values["progress"] = progress
            if checkpoint is not None:
                values["checkpoint"] = checkpoint
            guard = [
                *self._fence(attempt_no, runtime_instance_id),
                _c.lockUntil >= db_now(-self._lease_grace_ms),
            ]
            if not await self._guarded_update(conn, job_id, guard, values):
                job = await self._read(conn, job_id)
                if job is None:
                    raise JobNotFoundError(job_id)
                raise LeaseLostError(job_id, attempt_no, job.lifecycleStatus)
            row = (
                await conn.execute(
                    select(_c.lockUntil, _c.cancelRequestedAt).where(_c.id == job_id)
                )
            ).one()
            return HeartbeatOutcome(row.lockUntil, row.cancelRequestedAt is not None)

        return await run_transaction(self._engine, unit)

    async def claim_batches(
        self,
        job_types: Sequence[str],
        demands: Sequence[tuple[str, int]],
        *,
        conn: AsyncConnection | None = None,
    ) -> list[list[LeaseGrant]]:
        """Lease available queued jobs of ``job_types`` to several runtimes in one transaction.

        ``demands`` are (runtime instance id, how many) pairs; the answer holds each one's
        grants, in the same order. Highest priority first, then oldest, dealt out one at a time
        so that scarce work spreads over the runtimes. ``FOR UPDATE SKIP LOCKED`` on the dispatch
        index lets several schedulers claim at once without waiting on (or double-leasing) each
        other's rows; a guarded UPDATE per runtime then moves exactly its locked rows to running.
        One SELECT whatever the number of runtimes, so idle streams cost one query per round.
        """
        wanted = sum(max(0, want) for _, want in demands)
        if wanted <= 0 or not job_types:
            return [[] for _ in demands]

        async def unit(conn: AsyncConnection) -> list[list[LeaseGrant]]:
            found = await conn.execute(
                _SELECT_CLAIMABLE, {"b_types": sorted(job_types), "b_limit": wanted}
            )
            ids = list(found.scalars())
            shares = _deal(ids, [want for _, want in demands])
            if not ids:
                return _as_grants(shares, {})
            for (runtime_instance_id, _), share in zip(demands, shares, strict=True):
                if not share:
                    continue
                result = await conn.execute(
                    self._lock_many, {"b_ids": share, "lockedBy": runtime_instance_id}
                )
                if result.rowcount != len(share):
                    # Rows locked by this transaction cannot change under it; a mismatch is a bug.
                    raise RuntimeError(f"claimed {len(share)} jobs but leased {result.rowcount}")
            rows = await conn.execute(_SELECT_GRANTS, {"b_ids": ids})
            return _as_grants(shares, {r.id: _grant(r) for r in rows})

        return await self._in_transaction(conn, unit)

    @functools.cached_property
    def _lock_many(self) -> Update:
        """queued → running for the rows ``b_ids`` (locked by the caller), for ``lockedBy``."""
        values = self._lock_values("")
        del values["lockedBy"]  # a parameter
        return (
            update(_job)
            .where(
                _c.id.in_(bindparam("b_ids", expanding=True)),
                _status_in(sources_of(Operation.LOCK)),
            )
            .values(values)
        )

    async def release_undelivered(
        self, job_id: str, attempt_no: int, runtime_instance_id: str
    ) -> bool:
        """Give back a lease that never reached its runtime (its stream broke first).

        The attempt number stays used (no attempt is ever leased twice) but does not count
        against the job: ``maxAttempts`` grows by one. Only a lease that has never been
        heartbeated is released; returns whether it was.
        """
        guard = [
            *self._fence(attempt_no, runtime_instance_id),
            _c.lastHeartbeatAt.is_(None),
        ]
        values = {
            **_transition_values(target_of(Operation.REQUEUE)),
            **_UNLOCKED,
            "availableAt": db_now(),
            "queuedAt": db_now(),
            "maxAttempts": _c.maxAttempts + 1,
        }

        async def unit(conn: AsyncConnection) -> bool:
            return await self._guarded_update(conn, job_id, guard, values)

        return await run_transaction(self._engine, unit)

    async def requeue_for_retry(
        self,
        job_id: str,
        attempt_no: int,
        error: JobError,
        *,
        delay_ms: int,
        runtime_instance_id: str | None = None,
        overdue_only: bool = False,
        conn: AsyncConnection | None = None,
    ) -> datetime:
        """CAS running → queued for another attempt after ``delay_ms``; returns ``availableAt``.

        Matches the attempt number, so a stale runtime cannot requeue a newer attempt; refuses
        when no attempt is left or a cancel was requested (those end the job instead).
        """

        async def unit(conn: AsyncConnection) -> datetime:
            guard = [
                *self._fence(attempt_no, runtime_instance_id, overdue_only=overdue_only),
                _c.attemptCount < _c.maxAttempts,
                _c.cancelRequestedAt.is_(None),
            ]
            values = {
                **_transition_values(target_of(Operation.REQUEUE)),
                **_UNLOCKED,
                "availableAt": db_now(max(0, delay_ms)),
                "queuedAt": db_now(),
                "errorCode": error.code,
                "publicErrorMessage": error.public_message,
                "internalErrorMessage": error.internal_message,
            }
            if await self._guarded_update(conn, job_id, guard, values):
                row = (await conn.execute(select(_c.availableAt).where(_c.id == job_id))).one()
                return row.availableAt  # type: ignore[no-any-return]
            job = await self._read(conn, job_id)
            if job is not None and _holds_lease(job, attempt_no, runtime_instance_id):
                why = "a cancel was requested" if job.cancelRequestedAt else "no attempts are left"
                raise IllegalTransitionError(job_id, job.lifecycleStatus, "queued", why)
            miss = await self._explain(
                conn,
                job_id,
                Operation.REQUEUE,
                attempt_no=attempt_no,
                runtime_instance_id=runtime_instance_id,
            )
            raise miss

        return await self._in_transaction(conn, unit)

    # -- terminal ---------------------------------------------------------------------------

    async def mark_succeeded(
        self,
        job_id: str,
        attempt_no: int,
        *,
        output_hash: str,
        result_idempotency_key: str,
        validated_output: Any = None,
        runtime_instance_id: str | None = None,
        conn: AsyncConnection | None = None,
    ) -> None:
        """CAS running → succeeded for ``attempt_no``; clears the error fields."""
        params: dict[str, Any] = {
            "b_id": job_id,
            "b_attempt": attempt_no,
            "outputHash": output_hash,
            "resultIdempotencyKey": result_idempotency_key,
            "validatedOutput": validated_output,
        }
        if runtime_instance_id is not None:
            params["b_holder"] = runtime_instance_id

        async def unit(conn: AsyncConnection) -> None:
            statement = _succeed_statement(fenced_by_holder=runtime_instance_id is not None)
            if (await conn.execute(statement, params)).rowcount != 1:
                raise await self._explain(
                    conn,
                    job_id,
                    Operation.SUCCEED,
                    attempt_no=attempt_no,
                    runtime_instance_id=runtime_instance_id,
                )

        await self._in_transaction(conn, unit)

    async def mark_failed(
        self,
        job_id: str,
        attempt_no: int,
        error: JobError,
        *,
        runtime_instance_id: str | None = None,
        overdue_only: bool = False,
        conn: AsyncConnection | None = None,
    ) -> None:
        """CAS running → failed for ``attempt_no`` with the error fields."""
        values = {
            **_transition_values(target_of(Operation.FAIL)),
            "finishedAt": db_now(),
            "lockUntil": None,
            "errorCode": error.code,
            "publicErrorMessage": error.public_message,
            "internalErrorMessage": error.internal_message,
        }
        await self._fenced_terminal(
            conn,
            job_id,
            Operation.FAIL,
            attempt_no=attempt_no,
            runtime_instance_id=runtime_instance_id,
            overdue_only=overdue_only,
            values=values,
        )

    async def _fenced_terminal(
        self,
        conn: AsyncConnection | None,
        job_id: str,
        operation: Operation,
        *,
        attempt_no: int,
        runtime_instance_id: str | None,
        values: dict[str, Any],
        overdue_only: bool = False,
    ) -> None:
        async def unit(conn: AsyncConnection) -> None:
            guard = self._fence(attempt_no, runtime_instance_id, overdue_only=overdue_only)
            if not await self._guarded_update(conn, job_id, guard, values):
                raise await self._explain(
                    conn,
                    job_id,
                    operation,
                    attempt_no=attempt_no,
                    runtime_instance_id=runtime_instance_id,
                )

        await self._in_transaction(conn, unit)

    async def mark_cancelled(
        self,
        job_id: str,
        *,
        attempt_no: int | None = None,
        overdue_only: bool = False,
        conn: AsyncConnection | None = None,
    ) -> None:
        """→ cancelled from queued, or from running once a cancel was requested.

        With ``attempt_no``, a running job is only cancelled if that attempt still holds it.
        Legacy readers see ``status='failed'`` with ``errorCode='CANCELLED'``.
        """

        async def unit(conn: AsyncConnection) -> None:
            running = [
                _c.lifecycleStatus == LifecycleStatus.RUNNING.value,
                _c.cancelRequestedAt.is_not(None),
            ]
            if attempt_no is not None:
                running.append(_c.attemptCount == attempt_no)
            if overdue_only:
                running.append(self._overdue())
            guard = [
                or_(_c.lifecycleStatus == LifecycleStatus.QUEUED.value, and_(*running)),
            ]
            if await self._guarded_update(conn, job_id, guard, self._cancel_values()):
                return
            job = await self._read(conn, job_id)
            if job is None:
                raise JobNotFoundError(job_id)
            if job.is_terminal:
                raise JobNotCancellableError(job_id, job.lifecycleStatus)
            if attempt_no is not None and job.attemptCount != attempt_no:
                raise LeaseLostError(job_id, attempt_no, job.lifecycleStatus)
            raise IllegalTransitionError(
                job_id, job.lifecycleStatus, "cancelled", "no cancel was requested"
            )

        await self._in_transaction(conn, unit)

    def _cancel_values(self) -> dict[str, Any]:
        return {
            **_transition_values(target_of(Operation.CANCEL)),
            "finishedAt": db_now(),
            "lockUntil": None,
            "errorCode": LEGACY_CANCELLED_ERROR_CODE,
            "publicErrorMessage": "The job was cancelled.",
        }

    async def expire_queued(self, job_id: str, *, conn: AsyncConnection | None = None) -> None:
        """CAS queued → failed (JOB_EXPIRED) for a job whose schedule-to-start deadline passed."""

        async def unit(conn: AsyncConnection) -> None:
            guard = [
                _status_in(sources_of(Operation.EXPIRE)),
                _c.deadlineAt.is_not(None),
                _c.deadlineAt <= db_now(),
            ]
            values = {
                **_transition_values(target_of(Operation.EXPIRE)),
                "finishedAt": db_now(),
                "errorCode": "JOB_EXPIRED",
                "publicErrorMessage": "The job was not started before its deadline.",
            }
            if not await self._guarded_update(conn, job_id, guard, values):
                miss = await self._explain(conn, job_id, Operation.EXPIRE)
                if isinstance(miss, IllegalTransitionError) and miss.current == "queued":
                    miss = IllegalTransitionError(job_id, "queued", "failed", "deadline not passed")
                raise miss

        await self._in_transaction(conn, unit)

    async def request_cancellation(
        self, job_id: str, *, user_id: str | None = None, conn: AsyncConnection | None = None
    ) -> CancelOutcome:
        """Cancel a queued job at once, or flag a running one for its runtime to stop.

        With ``user_id`` only that user's job matches; another user's job is "not found".
        """
        owner = [] if user_id is None else [_c.userId == user_id]

        async def unit(conn: AsyncConnection) -> CancelOutcome:
            # Each round is two guarded UPDATEs; a job that moved from queued to running between
            # them is caught by the next round.
            for _ in range(3):
                queued = [*owner, _c.lifecycleStatus == LifecycleStatus.QUEUED.value]
                if await self._guarded_update(conn, job_id, queued, self._cancel_values()):
                    return "cancelled"
                running = [*owner, _c.lifecycleStatus == LifecycleStatus.RUNNING.value]
                values = {
                    "cancelRequestedAt": func.coalesce(_c.cancelRequestedAt, db_now()),
                    "updatedAt": db_now(),
                }
                if await self._guarded_update(conn, job_id, running, values):
                    return "cancel_requested"
                job = await self._read(conn, job_id)
                if job is None or (user_id is not None and job.userId != user_id):
                    raise JobNotFoundError(job_id)
                if job.is_terminal:
                    raise JobNotCancellableError(job_id, job.lifecycleStatus)
            raise JobNotCancellableError(job_id, "changing")

        return await self._in_transaction(conn, unit)

    # -- reads ------------------------------------------------------------------------------

    async def get(self, job_id: str, *, conn: AsyncConnection | None = None) -> JobRecord | None:
        if conn is not None:
            return await self._read(conn, job_id)
        async with self._engine.connect() as own:
            return await self._read(own, job_id)

    async def find_by_status(
        self,
        statuses: Iterable[LifecycleStatus],
        *,
        queue_name: str | None = None,
        limit: int = 100,
    ) -> list[JobRecord]:
        """Jobs in ``statuses``, oldest first."""
        query = select(*_RECORD_COLUMNS).where(_status_in(statuses))
        if queue_name is not None:
            query = query.where(_c.queueName == queue_name)
        query = query.order_by(_c.createdAt, _c.id).limit(limit)
        async with self._engine.connect() as conn:
            return [JobRecord.from_row(row) for row in await conn.execute(query)]

    async def page(
        self,
        filters: Sequence[ColumnElement[bool]],
        *,
        limit: int,
        before: tuple[datetime, str] | None = None,
    ) -> list[JobRecord]:
        """Jobs matching ``filters``, newest first, after the ``before`` (createdAt, id) cursor."""
        query = select(*_RECORD_COLUMNS).where(*filters)
        if before is not None:
            created_at, job_id = before
            query = query.where(
                or_(_c.createdAt < created_at, and_(_c.createdAt == created_at, _c.id < job_id))
            )
        query = query.order_by(_c.createdAt.desc(), _c.id.desc()).limit(limit)
        async with self._engine.connect() as conn:
            return [JobRecord.from_row(row) for row in await conn.execute(query)]

    async def find_expired_leases(self, *, limit: int = 100) -> list[ExpiredLease]:
        """Running attempts past ``lockUntil`` + grace or past their timeout + grace (DB time)."""
        query = (
            select(_c.id, _c.jobType, _c.attemptCount, _c.maxAttempts, _c.cancelRequestedAt)
            .where(_c.lifecycleStatus == LifecycleStatus.RUNNING.value, self._overdue())
            .order_by(_c.lockUntil)
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            return [
                ExpiredLease(
                    r.id, r.jobType, r.attemptCount, r.maxAttempts, r.cancelRequestedAt is not None
                )
                for r in await conn.execute(query)
            ]

    async def find_expired_deadlines(self, *, limit: int = 100) -> list[str]:
        """Queued jobs whose schedule-to-start deadline has passed."""
        query = (
            select(_c.id)
            .where(
                _c.lifecycleStatus == LifecycleStatus.QUEUED.value,
                _c.deadlineAt.is_not(None),
                _c.deadlineAt <= db_now(),
            )
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            return list((await conn.execute(query)).scalars())


def _deal(ids: Sequence[str], wants: Sequence[int]) -> list[list[str]]:
    """Deal ``ids`` (best first) one at a time to takers that still want more."""
    shares: list[list[str]] = [[] for _ in wants]
    queue = iter(ids)
    while True:
        dealt = False
        for index, want in enumerate(wants):
            if len(shares[index]) >= want:
                continue
            job_id = next(queue, None)
            if job_id is None:
                return shares
            shares[index].append(job_id)
            dealt = True
        if not dealt:
            return shares


def _as_grants(
    shares: Sequence[Sequence[str]], grants: dict[str, LeaseGrant]
) -> list[list[LeaseGrant]]:
    return [[grants[job_id] for job_id in share] for share in shares]

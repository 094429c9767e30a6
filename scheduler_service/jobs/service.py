"""Creating, reading and cancelling jobs for a user (design §5), on domain types."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import ColumnElement, Table, and_, bindparam, func, insert, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from scheduler_service import validation
from scheduler_service.db.clock import db_now, db_today
from scheduler_service.db.idempotent import insert_ignoring_duplicates
from scheduler_service.db.models import AiJob, AiJobArtifact, AiJobSnapshot, AiUserJobGate
from scheduler_service.db.retry import run_transaction
from scheduler_service.errors import (
    InvalidRequestError,
    JobNotCancellableError,
    JobNotFoundError,
    LimitExceededError,
    SchedulerError,
)
from scheduler_service.ids import new_id
from scheduler_service.jobs import paging
from scheduler_service.lifecycle.repository import (
    CancelOutcome,
    JobRecord,
    LifecycleRepository,
    NewJob,
)
from scheduler_service.lifecycle.state_machine import parse_status
from scheduler_service.outbox.writer import EventType, add_event
from scheduler_service.registry import JobRegistry
from scheduler_service.registry.definitions import CREDENTIAL_MODES
from shared.canonical_json import canonical_json
from shared.error_codes import ErrorCode

__all__ = [
    "CreateJobCommand",
    "IdempotencyKeyReusedError",
    "JobFilter",
    "JobNotRetryableError",
    "JobService",
    "Limits",
]

_jobs = cast(Table, AiJob.__table__)
_snapshots = cast(Table, AiJobSnapshot.__table__)
_artifacts = cast(Table, AiJobArtifact.__table__)
_gate = cast(Table, AiUserJobGate.__table__)

# Built once: statement construction costs more than executing a cached statement.
_INSERT_SNAPSHOT = insert(_snapshots).values(createdAt=db_now())
_LOCK_GATE = select(_gate.c.userId).where(_gate.c.userId == bindparam("b_user")).with_for_update()
_mine = _jobs.c.userId == bindparam("b_user")
_COUNT_ACTIVE_AND_TODAY = select(
    select(func.count())
    .where(_mine, _jobs.c.lifecycleStatus.in_(["queued", "running"]))
    .scalar_subquery(),
    select(func.count()).where(_mine, _jobs.c.createdAt >= db_today()).scalar_subquery(),
)

MAX_ID_FIELD = 191


class IdempotencyKeyReusedError(SchedulerError):
    code = ErrorCode.IDEMPOTENCY_KEY_REUSED

    def __init__(self) -> None:
        super().__init__("idempotency_key was already used for a different request")


class JobNotRetryableError(SchedulerError):
    code = ErrorCode.JOB_NOT_RETRYABLE

    def __init__(self, job_id: str, status: str) -> None:
        super().__init__(f"job {job_id!r} is {status}; only failed or cancelled jobs are retried")


@dataclass(frozen=True, slots=True)
class Limits:
    max_active_jobs_per_user: int = 100
    daily_job_quota_per_user: int = 10_000
    max_snapshot_bytes: int = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class JobFilter:
    """What ListJobs narrows to; ``user_id`` is the caller for JobService, optional for admins."""

    user_id: str | None = None
    job_type: str = ""
    lifecycle_status: str = ""
    queue_name: str = ""
    created_after: datetime | None = None
    created_before: datetime | None = None

    def scope(self) -> str:
        return hashlib.sha256(
            canonical_json(
                asdict(self)
                | {
                    "created_after": self.created_after.isoformat() if self.created_after else None,
                    "created_before": self.created_before.isoformat()
                    if self.created_before
                    else None,
                }
            )
        ).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateJobCommand:
    user_id: str
    job_type: str
    target_type: str = ""
    target_id: str = ""
    snapshot: dict[str, Any]
    params: dict[str, Any]
    idempotency_key: str = ""
    priority: int | None = None
    credential_mode: str = ""
    credential_id: str = ""
    deadline: datetime | None = None

    retried_from_job_id: str = ""

    def fingerprint(self) -> str:
        """What makes two creates "the same request" for the idempotency check."""
        fields = asdict(self)
        fields["deadline"] = self.deadline.isoformat() if self.deadline else None
        return hashlib.sha256(canonical_json(fields)).hexdigest()


@dataclass(frozen=True, slots=True)
class ArtifactRow:
    artifact_type: str
    artifact_id: str


#: Awaited once the transaction that took a hand-off has ended: committed or not.
Settle = Callable[[bool], Awaitable[None]]
#: Offers a just-created job's type to a local runtime inside the create's transaction.
Handoff = Callable[[AsyncConnection, str], Awaitable[Settle | None]]


async def _settle_all(settles: list[Settle], *, committed: bool) -> None:
    while settles:
        await settles.pop()(committed)


class JobService:
    def __init__(
        self,
        engine: AsyncEngine,
        repository: LifecycleRepository,
        registry: JobRegistry,
        *,
        limits: Limits | None = None,
        on_enqueued: Callable[[], None] = lambda: None,
        on_cancel_requested: Callable[[str], None] = lambda _job_id: None,
        handoff: Handoff | None = None,
    ) -> None:
        self._engine = engine
        self._repo = repository
        self._registry = registry
        self._limits = limits or Limits()
        self._on_enqueued = on_enqueued
        self._on_cancel_requested = on_cancel_requested
        self._handoff = handoff

    async def create(
        self, cmd: CreateJobCommand, *, enforce_limits: bool = True
    ) -> tuple[JobRecord, bool]:
        """Create the job, its snapshot and its ``ai.job.enqueue`` event in one transaction.

        A repeat with the same (user, job type, idempotency key) returns the first job with
        ``created=False``; the same key with a different request is refused.
        """
        new_job, snapshot, params = self._validate(cmd)
        if cmd.idempotency_key:
            existing = await self._find_by_key(cmd)
            if existing is not None:
                return self._same_request(existing, new_job), False

        settles: list[Settle] = []

        async def unit(conn: AsyncConnection) -> JobRecord:
            await _settle_all(settles, committed=False)  # a re-run: the last try rolled back
            if enforce_limits:
                await self._check_limits(conn, cmd.user_id)
            await self._repo.create(conn, new_job)
            await conn.execute(
                _INSERT_SNAPSHOT,
                {
                    "id": new_id(),
                    "jobId": new_job.job_id,
                    "schemaVersion": new_job.input_schema_version,
                    "content": snapshot,
                    "params": params,
                },
            )
            await add_event(
                conn,
                EventType.ENQUEUE,
                job_id=new_job.job_id,
                job_type=new_job.job_type,
                queueName=new_job.queue_name,
                priority=new_job.priority,
            )
            # The reply's row, read before commit on the same connection (saves a checkout).
            created = await self._repo.get(new_job.job_id, conn=conn)
            assert created is not None
            if self._handoff is not None:
                # A runtime here with a free slot gets its lease in this same transaction.
                settle = await self._handoff(conn, new_job.job_type)
                if settle is not None:
                    settles.append(settle)
            return created

        try:
            created = await run_transaction(self._engine, unit)
        except IntegrityError:
            await _settle_all(settles, committed=False)
            # Two creates with one key raced; the loser returns the winner's job.
            existing = await self._find_by_key(cmd) if cmd.idempotency_key else None
            if existing is None:
                raise
            return self._same_request(existing, new_job), False
        except BaseException:
            await _settle_all(settles, committed=False)
            raise
        await _settle_all(settles, committed=True)
        self._on_enqueued()
        return created, True

    async def _check_limits(self, conn: AsyncConnection, user_id: str) -> None:
        """Refuse a create over the user's caps. Creates of one user serialise on their gate row,
        so concurrent creates cannot all pass the count together."""
        await insert_ignoring_duplicates(conn, _gate, [{"userId": user_id}], stamped=("updatedAt",))
        await conn.execute(_LOCK_GATE, {"b_user": user_id})
        counts = await conn.execute(_COUNT_ACTIVE_AND_TODAY, {"b_user": user_id})
        active_jobs, today = counts.one()
        if active_jobs >= self._limits.max_active_jobs_per_user:
            raise LimitExceededError(
                ErrorCode.TOO_MANY_JOBS,
                f"at most {self._limits.max_active_jobs_per_user} jobs may be queued or running",
            )
        if today >= self._limits.daily_job_quota_per_user:
            raise LimitExceededError(
                ErrorCode.QUOTA_EXCEEDED,
                f"the daily quota of {self._limits.daily_job_quota_per_user} jobs is used up",
            )

    def _validate(self, cmd: CreateJobCommand) -> tuple[NewJob, dict[str, Any], dict[str, Any]]:
        definition = self._registry.get(cmd.job_type)
        _bounded(cmd.user_id, "x-user-id", required=True)
        _bounded(cmd.target_type, "target_type", limit=32)
        _bounded(cmd.target_id, "target_id", limit=255)
        _bounded(cmd.idempotency_key, "idempotency_key", limit=255)
        if len(canonical_json(cmd.snapshot)) > self._limits.max_snapshot_bytes:
            raise InvalidRequestError(
                f"snapshot is larger than {self._limits.max_snapshot_bytes} bytes",
                field="snapshot",
                code=ErrorCode.INVALID_SNAPSHOT,
            )
        snapshot = validation.against_schema(
            self._registry.input_schema(cmd.job_type),
            cmd.snapshot,
            "snapshot",
            ErrorCode.INVALID_SNAPSHOT,
        )
        params = validation.against_schema(
            self._registry.params_schema(cmd.job_type),
            cmd.params,
            "params",
            ErrorCode.INVALID_PARAMS,
        )
        priority = definition.routing.default_priority if cmd.priority is None else cmd.priority
        if not 0 <= priority <= 100:
            raise InvalidRequestError("priority must be between 0 and 100", field="priority")
        mode = cmd.credential_mode or definition.credential.default_mode
        if mode not in CREDENTIAL_MODES or mode not in definition.credential.allowed_modes:
            raise InvalidRequestError("credential_mode is not allowed", field="credential_mode")
        if mode == "user_deepseek_key" and not cmd.credential_id:
            raise InvalidRequestError("credential_id is required", field="credential_id")
        new_job = NewJob(
            job_id=new_id(),
            user_id=cmd.user_id,
            job_type=cmd.job_type,
            queue_name=definition.routing.queue_name,
            priority=priority,
            max_attempts=definition.execution.max_attempts,
            timeout_ms=definition.execution.timeout_ms,
            target_type=cmd.target_type or None,
            target_id=cmd.target_id or None,
            idempotency_key=cmd.idempotency_key or None,
            request_hash=cmd.fingerprint(),
            credential_mode=mode,
            credential_id=cmd.credential_id or None,
            model_name=definition.model_name,
            prompt_key=definition.prompt_key,
            prompt_version=definition.prompt_version,
            input_schema_version=definition.input.version,
            output_schema_version=definition.output.version,
            deadline_at=cmd.deadline,
            retried_from_job_id=cmd.retried_from_job_id or None,
        )
        return new_job, snapshot.model_dump(mode="json"), params.model_dump(mode="json")

    async def _find_by_key(self, cmd: CreateJobCommand) -> JobRecord | None:
        async with self._engine.connect() as conn:
            job_id = (
                await conn.execute(
                    select(_jobs.c.id).where(
                        _jobs.c.userId == cmd.user_id,
                        _jobs.c.jobType == cmd.job_type,
                        _jobs.c.idempotencyKey == cmd.idempotency_key,
                    )
                )
            ).scalar_one_or_none()
            return None if job_id is None else await self._repo.get(job_id, conn=conn)

    @staticmethod
    def _same_request(existing: JobRecord, new_job: NewJob) -> JobRecord:
        if existing.requestHash != new_job.request_hash:
            raise IdempotencyKeyReusedError
        return existing

    async def get(self, user_id: str, job_id: str) -> tuple[JobRecord, list[ArtifactRow]]:
        """One of ``user_id``'s jobs; another user's job is "not found", like a missing one."""
        validation.job_id(job_id)
        job = await self._repo.get(job_id)
        if job is None or job.userId != user_id:
            raise JobNotFoundError(job_id)
        return job, await self.artifacts(job_id)

    async def artifacts(self, job_id: str) -> list[ArtifactRow]:
        query = (
            select(_artifacts.c.artifactType, _artifacts.c.artifactId)
            .where(_artifacts.c.jobId == job_id)
            .order_by(_artifacts.c.ordinal)
        )
        async with self._engine.connect() as conn:
            return [ArtifactRow(r.artifactType, r.artifactId) for r in await conn.execute(query)]

    async def cancel(self, user_id: str, job_id: str) -> tuple[JobRecord, CancelOutcome]:
        """Cancel a queued job at once (with its ``ai.job.cancelled`` event, in one transaction),
        or ask a running one to stop."""
        validation.job_id(job_id)

        async def unit(conn: AsyncConnection) -> CancelOutcome:
            outcome = await self._repo.request_cancellation(job_id, user_id=user_id, conn=conn)
            if outcome == "cancelled":
                job = await self._repo.get(job_id, conn=conn)
                assert job is not None
                await add_event(conn, EventType.CANCELLED, job_id=job_id, job_type=job.jobType)
            return outcome

        outcome = await run_transaction(self._engine, unit)
        if outcome == "cancel_requested":
            self._on_cancel_requested(job_id)
        job = await self._repo.get(job_id)
        assert job is not None
        return job, outcome

    async def get_any(self, job_id: str) -> tuple[JobRecord, list[ArtifactRow]]:
        """Any job (admins)."""
        validation.job_id(job_id)
        job = await self._repo.get(job_id)
        if job is None:
            raise JobNotFoundError(job_id)
        return job, await self.artifacts(job_id)

    async def list_jobs(
        self, filters: JobFilter, page_size: int, page_token: str
    ) -> tuple[list[JobRecord], str]:
        """One page of jobs, newest first, and the token of the next page ("" on the last)."""
        where = self._filter_clauses(filters)
        size = paging.page_size(page_size)
        cursor = paging.decode(page_token, filters.scope())
        before = (cursor.created_at, cursor.job_id) if cursor else None
        rows = await self._repo.page(where, limit=size + 1, before=before)
        if len(rows) <= size:
            return rows, ""
        last = rows[size - 1]
        return rows[:size], paging.encode(paging.Cursor(last.createdAt, last.id), filters.scope())

    @staticmethod
    def _filter_clauses(filters: JobFilter) -> list[ColumnElement[bool]]:
        c = _jobs.c
        where: list[ColumnElement[bool]] = []
        if filters.user_id is not None:
            where.append(c.userId == filters.user_id)
        if filters.job_type:
            where.append(c.jobType == filters.job_type)
        if filters.lifecycle_status:
            try:
                status = parse_status(filters.lifecycle_status)
            except ValueError:
                raise InvalidRequestError(
                    "lifecycle_status must be queued, running, succeeded, failed or cancelled",
                    field="lifecycle_status",
                ) from None
            where.append(c.lifecycleStatus == status.value)
        if filters.queue_name:
            where.append(c.queueName == filters.queue_name)
        if filters.created_after is not None:
            where.append(c.createdAt >= filters.created_after)
        if filters.created_before is not None:
            where.append(c.createdAt < filters.created_before)
        return where

    async def watch(
        self,
        user_id: str | None,
        job_id: str,
        *,
        poll_s: float,
        changed: Callable[[str], Awaitable[None]],
    ) -> AsyncIterator[JobRecord]:
        """The job now, then each change of state, progress or attempt; ends when terminal.

        ``changed(job_id)`` returns early when this scheduler changes the job; otherwise the row
        is read again every ``poll_s`` (changes made through other replicas).
        """
        job, _ = await (self.get(user_id, job_id) if user_id is not None else self.get_any(job_id))
        yield job
        seen = _watch_key(job)
        while not job.is_terminal:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed(job_id), timeout=poll_s)
            current = await self._repo.get(job_id)
            if current is None:
                return
            job = current
            if _watch_key(job) != seen:
                seen = _watch_key(job)
                yield job

    async def retry(self, job_id: str) -> JobRecord:
        """A new job with the input of a failed or cancelled one; repeats return the same job."""
        source, _ = await self.get_any(job_id)
        if source.lifecycleStatus.value not in ("failed", "cancelled"):
            raise JobNotRetryableError(job_id, source.lifecycleStatus.value)
        async with self._engine.connect() as conn:
            snapshot = (
                await conn.execute(
                    select(_snapshots.c.content, _snapshots.c.params).where(
                        _snapshots.c.jobId == job_id
                    )
                )
            ).first()
        command = CreateJobCommand(
            user_id=source.userId,
            job_type=source.jobType,
            target_type=source.targetType or "",
            target_id=source.targetId or "",
            snapshot=snapshot.content if snapshot else {},
            params=(snapshot.params or {}) if snapshot else {},
            idempotency_key=f"retry:{job_id}",
            priority=source.priority,
            credential_mode=source.credentialMode,
            credential_id=source.credentialId or "",
            retried_from_job_id=job_id,
        )
        job, _created = await self.create(command, enforce_limits=False)
        return job

    async def cancel_user_jobs(self, user_id: str) -> tuple[int, int]:
        """Cancel a user's queued jobs and ask their running ones to stop (consent withdrawn)."""
        _bounded(user_id, "user_id", required=True)
        cancelled = requested = 0
        c = _jobs.c
        not_yet_asked = [
            c.userId == user_id,
            or_(
                c.lifecycleStatus == "queued",
                and_(c.lifecycleStatus == "running", c.cancelRequestedAt.is_(None)),
            ),
        ]
        while batch := await self._repo.page(not_yet_asked, limit=500):
            progressed = False
            for job in batch:
                try:
                    _, outcome = await self.cancel(user_id, job.id)
                except (JobNotCancellableError, JobNotFoundError):
                    continue  # finished meanwhile
                progressed = True
                if outcome == "cancelled":
                    cancelled += 1
                else:
                    requested += 1
            if not progressed:
                break
        return cancelled, requested


def _watch_key(job: JobRecord) -> tuple[object, ...]:
    return (
        job.lifecycleStatus,
        job.progress,
        job.attemptCount,
        job.cancelRequestedAt,
        job.errorCode,
    )


def _bounded(value: str, field: str, *, limit: int = MAX_ID_FIELD, required: bool = False) -> None:
    if required and not value:
        raise InvalidRequestError(f"{field} is required", field=field)
    if len(value) > limit:
        raise InvalidRequestError(f"{field} is longer than {limit} characters", field=field)

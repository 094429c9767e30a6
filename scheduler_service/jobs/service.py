"""Creating, reading and cancelling jobs for a user (design §5), on domain types."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from scheduler_service import validation
from scheduler_service.db.clock import db_now
from scheduler_service.db.models import AiJob, AiJobArtifact, AiJobSnapshot
from scheduler_service.db.retry import run_transaction
from scheduler_service.errors import InvalidRequestError, JobNotFoundError, SchedulerError
from scheduler_service.ids import new_id
from scheduler_service.lifecycle.repository import (
    CancelOutcome,
    JobRecord,
    LifecycleRepository,
    NewJob,
)
from scheduler_service.outbox.writer import EventType, add_event
from scheduler_service.registry import JobRegistry
from scheduler_service.registry.definitions import CREDENTIAL_MODES
from shared.canonical_json import canonical_json
from shared.error_codes import ErrorCode

__all__ = ["CreateJobCommand", "IdempotencyKeyReusedError", "JobService"]

_jobs = cast(Table, AiJob.__table__)
_snapshots = cast(Table, AiJobSnapshot.__table__)
_artifacts = cast(Table, AiJobArtifact.__table__)

MAX_ID_FIELD = 191


class IdempotencyKeyReusedError(SchedulerError):
    code = ErrorCode.IDEMPOTENCY_KEY_REUSED

    def __init__(self) -> None:
        super().__init__("idempotency_key was already used for a different request")


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

    def fingerprint(self) -> str:
        """What makes two creates "the same request" for the idempotency check."""
        fields = asdict(self)
        fields["deadline"] = self.deadline.isoformat() if self.deadline else None
        return hashlib.sha256(canonical_json(fields)).hexdigest()


@dataclass(frozen=True, slots=True)
class ArtifactRow:
    artifact_type: str
    artifact_id: str


class JobService:
    def __init__(
        self,
        engine: AsyncEngine,
        repository: LifecycleRepository,
        registry: JobRegistry,
        *,
        on_enqueued: Callable[[], None] = lambda: None,
        on_cancel_requested: Callable[[str], None] = lambda _job_id: None,
    ) -> None:
        self._engine = engine
        self._repo = repository
        self._registry = registry
        self._on_enqueued = on_enqueued
        self._on_cancel_requested = on_cancel_requested

    async def create(self, cmd: CreateJobCommand) -> tuple[JobRecord, bool]:
        """Create the job, its snapshot and its ``ai.job.enqueue`` event in one transaction.

        A repeat with the same (user, job type, idempotency key) returns the first job with
        ``created=False``; the same key with a different request is refused.
        """
        new_job, snapshot, params = self._validate(cmd)
        if cmd.idempotency_key:
            existing = await self._find_by_key(cmd)
            if existing is not None:
                return self._same_request(existing, new_job), False

        async def unit(conn: AsyncConnection) -> None:
            await self._repo.create(conn, new_job)
            await conn.execute(
                insert(_snapshots).values(
                    id=new_id(),
                    jobId=new_job.job_id,
                    schemaVersion=new_job.input_schema_version,
                    content=snapshot,
                    params=params,
                    createdAt=db_now(),
                )
            )
            await add_event(
                conn,
                EventType.ENQUEUE,
                job_id=new_job.job_id,
                job_type=new_job.job_type,
                queueName=new_job.queue_name,
                priority=new_job.priority,
            )

        try:
            await run_transaction(self._engine, unit)
        except IntegrityError:
            # Two creates with one key raced; the loser returns the winner's job.
            existing = await self._find_by_key(cmd) if cmd.idempotency_key else None
            if existing is None:
                raise
            return self._same_request(existing, new_job), False
        self._on_enqueued()
        created = await self._repo.get(new_job.job_id)
        assert created is not None
        return created, True

    def _validate(self, cmd: CreateJobCommand) -> tuple[NewJob, dict[str, Any], dict[str, Any]]:
        definition = self._registry.get(cmd.job_type)
        _bounded(cmd.user_id, "x-user-id", required=True)
        _bounded(cmd.target_type, "target_type", limit=32)
        _bounded(cmd.target_id, "target_id", limit=255)
        _bounded(cmd.idempotency_key, "idempotency_key", limit=255)
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


def _bounded(value: str, field: str, *, limit: int = MAX_ID_FIELD, required: bool = False) -> None:
    if required and not value:
        raise InvalidRequestError(f"{field} is required", field=field)
    if len(value) > limit:
        raise InvalidRequestError(f"{field} is longer than {limit} characters", field=field)

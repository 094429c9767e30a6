"""Creating, reading and cancelling jobs for a user, on domain types (docs/architecture.md,
*One job's walk*).

Every database step runs through the unit of work; the wake-ups that follow a commit (dispatch,
watchers, the outbox, a running job's cancel notice) are its hooks and events, never callbacks
wired in here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError

from scheduler_service import validation
from scheduler_service.billing.budgets import Budget, admit_within_budgets
from scheduler_service.errors import (
    IdempotencyKeyReusedError,
    InvalidRequestError,
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRetryableError,
    LimitExceededError,
    SchedulerError,
)
from scheduler_service.flow.keys import estimate_tokens
from scheduler_service.ids import new_id
from scheduler_service.jobs import paging
from scheduler_service.jobs.commands import CreateJobCommand, JobFilter, Limits
from scheduler_service.lifecycle.records import (
    ArtifactRow,
    CancelOutcome,
    JobRecord,
    NewJob,
    WatchState,
)
from scheduler_service.lifecycle.state_machine import LifecycleStatus, parse_status
from scheduler_service.outbox.events import EventType, NewEvent
from scheduler_service.ports import Transaction, UnitOfWork
from scheduler_service.registry import JobRegistry
from scheduler_service.registry.definitions import CREDENTIAL_MODES
from shared.canonical_json import canonical_json
from shared.error_codes import ErrorCode

__all__ = ["MAX_BULK_CREATE", "CreateResult", "Created", "Handoff", "JobService"]

MAX_ID_FIELD = 191
#: The states whose jobs reserve their token estimate against a create's budget check.
ACTIVE_STATES = (LifecycleStatus.QUEUED.value, LifecycleStatus.RUNNING.value)
#: Most items one CreateJobs call may carry.
MAX_BULK_CREATE = 500


@dataclass(frozen=True, slots=True)
class Created:
    """One create's answer: the job, and whether this call created it (False: a repeat)."""

    job: JobRecord
    created: bool


CreateResult = Created | SchedulerError

#: Offers a just-created job's type to a local runtime inside the create's transaction; it
#: registers its own after-commit delivery and after-rollback release on ``tx``.
Handoff = Callable[[Transaction, str], Awaitable[None]]


def _check_deadline(deadline: datetime | None, now: datetime | None) -> None:
    """A schedule-to-start deadline already past by the database clock could only expire."""
    if deadline is not None and now is not None and deadline <= now:
        raise InvalidRequestError("deadline is in the past", field="deadline")


def _budget_spent() -> LimitExceededError:
    return LimitExceededError(
        ErrorCode.BUDGET_EXCEEDED, "the daily budget is spent; it renews at midnight UTC"
    )


class JobService:
    def __init__(
        self,
        uow: UnitOfWork,
        registry: JobRegistry,
        *,
        limits: Limits | None = None,
        handoff: Handoff | None = None,
        budget: Budget | None = None,
    ) -> None:
        self._uow = uow
        self._registry = registry
        self._limits = limits or Limits()
        #: The default daily budget of a user no operator set one for.
        self._budget = budget or Budget()
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
                return self._same_request(existing, new_job, cmd), False

        async def insert(tx: Transaction) -> JobRecord:
            if new_job.deadline_at is not None:
                _check_deadline(new_job.deadline_at, await tx.jobs.clock())
            if enforce_limits:
                await self._check_limits(tx, cmd.user_id, new_job.token_estimate)
            await tx.jobs.create(new_job, snapshot, params)
            await tx.emit(
                EventType.ENQUEUE,
                job_id=new_job.job_id,
                job_type=new_job.job_type,
                queueName=new_job.queue_name,
                priority=new_job.priority,
            )
            # The reply's row, read before commit on the same connection (saves a checkout).
            created = await tx.jobs.get(new_job.job_id)
            assert created is not None
            if self._handoff is not None:
                # A runtime here with a free slot gets its lease in this same transaction.
                await self._handoff(tx, new_job.job_type)
            return created

        try:
            return await self._uow.run(insert), True
        except IntegrityError:
            # Two creates with one key raced; the loser returns the winner's job.
            existing = await self._find_by_key(cmd) if cmd.idempotency_key else None
            if existing is None:
                raise
            return self._same_request(existing, new_job, cmd), False

    async def _check_limits(self, tx: Transaction, user_id: str, estimate_tokens: int) -> None:
        """Refuse a create over the user's caps or budget (creates of one user serialise on a lock
        the store takes, so concurrent creates cannot all pass the count or the budget together:
        each reserves its estimate, billing/budgets.py)."""
        refusal = self._over_limits(*await tx.jobs.lock_user_gate(user_id))
        if refusal is not None:
            raise refusal
        standings = await tx.jobs.budget_standings({user_id}, self._budget, ACTIVE_STATES)
        if not admit_within_budgets([("", user_id, estimate_tokens)], standings):
            raise _budget_spent()

    def _over_limits(self, active_jobs: int, today: int) -> LimitExceededError | None:
        if active_jobs >= self._limits.max_active_jobs_per_user:
            return LimitExceededError(
                ErrorCode.TOO_MANY_JOBS,
                f"at most {self._limits.max_active_jobs_per_user} jobs may be queued or running",
            )
        if today >= self._limits.daily_job_quota_per_user:
            return LimitExceededError(
                ErrorCode.QUOTA_EXCEEDED,
                f"the daily quota of {self._limits.daily_job_quota_per_user} jobs is used up",
            )
        return None

    async def create_many(self, commands: Sequence[CreateJobCommand]) -> list[CreateResult]:
        """Create several jobs, each exactly as :meth:`create` would (validated, deduplicated by
        its idempotency key, checked against its user's caps), answering each in order with its
        job or the error its own CreateJob would raise. The jobs that pass commit together:
        one transaction, multi-row inserts, one wake-up of the dispatcher."""
        if len(commands) > MAX_BULK_CREATE:
            raise InvalidRequestError(f"at most {MAX_BULK_CREATE} items per call", field="items")
        results: dict[int, CreateResult] = {}
        prepared: dict[int, tuple[NewJob, dict[str, Any], dict[str, Any]]] = {}
        for index, cmd in enumerate(commands):
            try:
                prepared[index] = self._validate(cmd)
            except SchedulerError as exc:
                results[index] = exc
        for _ in range(3):
            try:
                results |= await self._create_prepared(commands, prepared)
                break
            except IntegrityError:
                # A concurrent create took one of the keys: the next round finds it as existing.
                continue
        else:
            results |= await self._create_prepared(commands, prepared)
        return [results[index] for index in range(len(commands))]

    async def _create_prepared(
        self,
        commands: Sequence[CreateJobCommand],
        prepared: dict[int, tuple[NewJob, dict[str, Any], dict[str, Any]]],
    ) -> dict[int, CreateResult]:
        keys = {i: commands[i].idempotency_key_tuple() for i in prepared}
        wanted = {key for key in keys.values() if key is not None}
        existing_ids: dict[tuple[str, str, str], str] = {}
        existing: dict[str, JobRecord] = {}
        if wanted:
            existing_ids = await self._uow.read(lambda tx: tx.jobs.ids_by_keys(wanted))
        if existing_ids:
            existing = await self._uow.read(
                lambda tx: tx.jobs.get_many(list(existing_ids.values()))
            )
        results: dict[int, CreateResult] = {}
        first_of_key: dict[tuple[str, str, str], int] = {}
        fresh: list[int] = []
        for index in prepared:
            key = keys[index]
            if key is not None and key in existing_ids:
                results[index] = self._bulk_same(
                    existing[existing_ids[key]], index, commands, prepared
                )
            elif key is not None and key in first_of_key:
                continue  # answered below, like its first occurrence
            else:
                if key is not None:
                    first_of_key[key] = index
                fresh.append(index)

        async def insert(tx: Transaction) -> tuple[dict[int, CreateResult], list[int]]:
            refused, accepted = await self._admitted(
                tx, [(i, commands[i].user_id, prepared[i][0]) for i in fresh]
            )
            await tx.jobs.create_many([prepared[i] for i in accepted])
            await tx.emit_many(
                [
                    NewEvent(
                        EventType.ENQUEUE,
                        prepared[i][0].job_id,
                        prepared[i][0].job_type,
                        {
                            "queueName": prepared[i][0].queue_name,
                            "priority": prepared[i][0].priority,
                        },
                    )
                    for i in accepted
                ]
            )
            rows = await tx.jobs.get_many([prepared[i][0].job_id for i in accepted])
            for index in accepted:
                refused[index] = Created(rows[prepared[index][0].job_id], True)
            return refused, accepted

        created, _accepted = await self._uow.run(insert)
        results |= created
        for index in prepared:
            key = keys[index]
            if index in results or key is None:
                continue
            first = results[first_of_key[key]]
            results[index] = (
                self._bulk_same(first.job, index, commands, prepared)
                if isinstance(first, Created)
                else first
            )
        return results

    async def _admitted(
        self, tx: Transaction, fresh: Sequence[tuple[int, str, NewJob]]
    ) -> tuple[dict[int, CreateResult], list[int]]:
        """Which of a bulk create's new jobs pass their users' caps, budgets and their own
        deadlines (under the users' gate locks): the refusals by index, and the accepted."""
        users = {user for _, user, _ in fresh}
        counts = dict(await tx.jobs.lock_user_gates(users))
        standings = await tx.jobs.budget_standings(users, self._budget, ACTIVE_STATES)
        within = set(
            admit_within_budgets(
                [(str(index), user, job.token_estimate) for index, user, job in fresh], standings
            )
        )
        deadlines = any(job.deadline_at is not None for _, _, job in fresh)
        now = await tx.jobs.clock() if deadlines else None
        refused: dict[int, CreateResult] = {}
        accepted: list[int] = []
        for index, user, job in fresh:
            try:
                _check_deadline(job.deadline_at, now)
            except InvalidRequestError as past:
                refused[index] = past
                continue
            refusal = self._over_limits(*counts[user]) if str(index) in within else _budget_spent()
            if refusal is not None:
                refused[index] = refusal
                continue
            active, today = counts[user]
            counts[user] = (active + 1, today + 1)
            accepted.append(index)
        return refused, accepted

    def _bulk_same(
        self,
        existing: JobRecord,
        index: int,
        commands: Sequence[CreateJobCommand],
        prepared: dict[int, tuple[NewJob, dict[str, Any], dict[str, Any]]],
    ) -> CreateResult:
        try:
            return Created(self._same_request(existing, prepared[index][0], commands[index]), False)
        except SchedulerError as exc:
            return exc

    def _validate(self, cmd: CreateJobCommand) -> tuple[NewJob, dict[str, Any], dict[str, Any]]:
        definition = self._registry.get(cmd.job_type)
        validation.user_id(cmd.user_id)
        validation.idempotency_key(cmd.idempotency_key)
        _bounded(cmd.target_type, "target_type", limit=32)
        _bounded(cmd.target_id, "target_id", limit=255)
        _bounded(cmd.credential_id, "credential_id", limit=255)
        _bounded(cmd.model, "model", limit=64)
        validation.json_value(
            cmd.snapshot, "snapshot", ErrorCode.INVALID_SNAPSHOT, lease_numbers=True
        )
        validation.json_value(cmd.params, "params", ErrorCode.INVALID_PARAMS, lease_numbers=True)
        snapshot_bytes = len(canonical_json(cmd.snapshot))
        if snapshot_bytes > self._limits.max_snapshot_bytes:
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
        model = cmd.model or definition.model_name
        if model != definition.model_name and model not in definition.allowed_models:
            raise InvalidRequestError("model is not allowed for this job type", field="model")
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
            request_hash=dataclasses.replace(
                cmd,
                priority=priority,
                credential_mode=mode,
                # Naming the default model is the same request as naming none.
                model="" if model == definition.model_name else model,
                snapshot=snapshot.model_dump(mode="json"),
                params=params.model_dump(mode="json"),
            ).fingerprint(),
            credential_mode=mode,
            credential_id=cmd.credential_id or None,
            model_name=model,
            model_provider=definition.model_provider,
            max_output_tokens=definition.max_output_tokens,
            trace_parent=cmd.traceparent or None,
            token_estimate=estimate_tokens(
                snapshot_bytes + len(canonical_json(cmd.params)), definition.max_output_tokens
            ),
            prompt_key=definition.prompt_key,
            prompt_version=definition.prompt_version,
            input_schema_version=definition.input.version,
            output_schema_version=definition.output.version,
            deadline_at=cmd.deadline,
            retried_from_job_id=cmd.retried_from_job_id or None,
        )
        return new_job, snapshot.model_dump(mode="json"), params.model_dump(mode="json")

    async def _find_by_key(self, cmd: CreateJobCommand) -> JobRecord | None:
        async def find(tx: Transaction) -> JobRecord | None:
            job_id = await tx.jobs.id_by_key(cmd.user_id, cmd.job_type, cmd.idempotency_key)
            return None if job_id is None else await tx.jobs.get(job_id)

        return await self._uow.read(find)

    @staticmethod
    def _same_request(existing: JobRecord, new_job: NewJob, cmd: CreateJobCommand) -> JobRecord:
        """The first job when ``cmd`` asks for the same thing once defaults are applied (an
        explicit default priority is the same request); rows written before defaults were part
        of the fingerprint hold the literal request's."""
        if existing.requestHash not in (new_job.request_hash, cmd.fingerprint()):
            raise IdempotencyKeyReusedError
        return existing

    async def get(self, user_id: str | None, job_id: str) -> tuple[JobRecord, list[ArtifactRow]]:
        """A job with its artifacts. With ``user_id``, only that user's: another user's job is
        "not found", like a missing one. Without it (admins), any job."""
        validation.job_id(job_id)

        async def read(tx: Transaction) -> tuple[JobRecord | None, list[ArtifactRow]]:
            job = await tx.jobs.get(job_id)
            if job is None or (user_id is not None and job.userId != user_id):
                return None, []
            return job, await tx.jobs.artifacts(job_id)

        job, artifacts = await self._uow.read(read)
        if job is None:
            raise JobNotFoundError(job_id)
        return job, artifacts

    async def get_any(self, job_id: str) -> tuple[JobRecord, list[ArtifactRow]]:
        """Any job (admins)."""
        return await self.get(None, job_id)

    async def artifacts(self, job_id: str) -> list[ArtifactRow]:
        return await self._uow.read(lambda tx: tx.jobs.artifacts(job_id))

    async def cancel(self, user_id: str, job_id: str) -> tuple[JobRecord, CancelOutcome]:
        """Cancel a queued job at once (with its ``ai.job.cancelled`` event, in one transaction),
        or ask a running one to stop."""
        validation.job_id(job_id)

        async def cancel(tx: Transaction) -> tuple[JobRecord, CancelOutcome]:
            outcome = await tx.jobs.request_cancellation(job_id, user_id=user_id)
            job = await tx.jobs.get(job_id)
            assert job is not None
            if outcome is CancelOutcome.CANCELLED:
                await tx.emit(EventType.CANCELLED, job_id=job_id, job_type=job.jobType)
            else:
                tx.cancel_requested(job_id)
            return job, outcome

        return await self._uow.run(cancel)

    async def list_jobs(
        self, filters: JobFilter, page_size: int, page_token: str
    ) -> tuple[list[JobRecord], str]:
        """One page of jobs, newest first, and the token of the next page ("" on the last)."""
        if filters.lifecycle_status:
            try:
                parse_status(filters.lifecycle_status)
            except ValueError:
                raise InvalidRequestError(
                    "lifecycle_status must be queued, running, succeeded, failed or cancelled",
                    field="lifecycle_status",
                ) from None
        size = paging.page_size(page_size)
        cursor = paging.decode(page_token, filters.scope())
        before = (cursor.created_at, cursor.job_id) if cursor else None
        rows = await self._uow.read(lambda tx: tx.jobs.page(filters, limit=size + 1, before=before))
        if len(rows) <= size:
            return rows, ""
        last = rows[size - 1]
        return rows[:size], paging.encode(paging.Cursor(last.createdAt, last.id), filters.scope())

    async def watch(
        self,
        user_id: str | None,
        job_id: str,
        *,
        changed: Callable[[str, WatchState], Awaitable[None]],
        current: Callable[[str], Awaitable[JobRecord | None]] | None = None,
    ) -> AsyncGenerator[JobRecord, None]:
        """The job now, then each change of state, progress or attempt; ends when terminal.

        ``changed(job_id, seen)`` returns once the job's state differs from ``seen`` (the
        replica's watch hub reads every watched job once an interval, and wakes a watcher at once
        when this replica changes its job); the job is read again only then, by ``current``
        (the hub's read, shared by the job's watchers) when given.
        """
        job, _ = await self.get(user_id, job_id)
        yield job
        seen = job.watch_state()
        while not job.is_terminal:
            await changed(job_id, seen)
            now = await (current or self._read_job)(job_id)
            if now is None:
                return
            job = now
            if job.watch_state() != seen:
                seen = job.watch_state()
                yield job

    async def _read_job(self, job_id: str) -> JobRecord | None:
        return await self._uow.read(lambda tx: tx.jobs.get(job_id))

    async def retry(self, job_id: str) -> JobRecord:
        """A new job with the input of a failed or cancelled one; repeats return the same job."""
        source, _ = await self.get_any(job_id)
        if source.lifecycleStatus not in (LifecycleStatus.FAILED, LifecycleStatus.CANCELLED):
            raise JobNotRetryableError(job_id, source.lifecycleStatus.value)
        snapshot, params = await self._uow.read(lambda tx: tx.jobs.snapshot(job_id))
        command = CreateJobCommand(
            user_id=source.userId,
            job_type=source.jobType,
            target_type=source.targetType or "",
            target_id=source.targetId or "",
            snapshot=snapshot,
            params=params,
            idempotency_key=f"retry:{job_id}",
            priority=source.priority,
            credential_mode=source.credentialMode,
            credential_id=source.credentialId or "",
            model=source.modelName,
            retried_from_job_id=job_id,
        )
        job, _created = await self.create(command, enforce_limits=False)
        return job

    async def cancel_user_jobs(self, user_id: str) -> tuple[int, int]:
        """Cancel a user's queued jobs and ask their running ones to stop (consent withdrawn)."""
        validation.user_id(user_id, "user_id")
        cancelled = requested = 0
        while batch := await self._uow.read(lambda tx: tx.jobs.awaiting_cancel(user_id, limit=500)):
            progressed = False
            for job in batch:
                try:
                    _, outcome = await self.cancel(user_id, job.id)
                except (JobNotCancellableError, JobNotFoundError):
                    continue  # finished meanwhile
                progressed = True
                if outcome is CancelOutcome.CANCELLED:
                    cancelled += 1
                else:
                    requested += 1
            if not progressed:
                break
        return cancelled, requested


def _bounded(value: str, field: str, *, limit: int = MAX_ID_FIELD, required: bool = False) -> None:
    if required and not value:
        raise InvalidRequestError(f"{field} is required", field=field)
    if len(value) > limit:
        raise InvalidRequestError(f"{field} is longer than {limit} characters", field=field)

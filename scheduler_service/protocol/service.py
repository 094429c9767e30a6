"""The runtime protocol's core: what Lock, Heartbeat, SubmitResult, SubmitFailure and the reaper
do, on domain types. The gRPC servicer translates protobuf to these calls and back."""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from scheduler_service import metrics, validation
from scheduler_service.credentials import CredentialStore, CredentialUnavailableError
from scheduler_service.db.retry import run_transaction
from scheduler_service.errors import (
    IllegalTransitionError,
    InvalidRequestError,
    JobAlreadyTerminalError,
    JobNotFoundError,
    LeaseLostError,
    LifecycleError,
    NotLeaseHolderError,
    ResultAlreadyExistsError,
)
from scheduler_service.lifecycle.repository import (
    ExpiredLease,
    HeartbeatOutcome,
    JobError,
    JobRecord,
    LeaseGrant,
    LifecycleRepository,
)
from scheduler_service.lifecycle.retry_policy import decide
from scheduler_service.lifecycle.state_machine import LifecycleStatus
from scheduler_service.outbox.writer import EventType, add_event
from scheduler_service.projection.projectors import JobContext, project
from scheduler_service.protocol.leases import LeasePayload, load_payloads
from scheduler_service.registry import JobRegistry
from scheduler_service.registry.definitions import Backoff
from scheduler_service.usage import Usage, record_usage
from shared.canonical_json import output_hash, result_idempotency_key
from shared.error_codes import ErrorCode

__all__ = [
    "FailureOutcome",
    "FailureReport",
    "ResultSubmission",
    "RuntimeProtocol",
    "SubmitOutcome",
]

log = logging.getLogger(__name__)

#: Used for a job whose type is no longer registered (a definition removed while jobs ran).
_FALLBACK_BACKOFF = Backoff(base_ms=5_000)


@dataclass(frozen=True, slots=True)
class ResultSubmission:
    job_id: str
    attempt_no: int
    runtime_instance_id: str
    output_hash: str
    output_json: str
    usage: Usage | None


@dataclass(frozen=True, slots=True)
class SubmitOutcome:
    result_idempotency_key: str
    duplicate: bool


@dataclass(frozen=True, slots=True)
class FailureReport:
    job_id: str
    attempt_no: int
    runtime_instance_id: str
    error_code: str
    retryable: bool
    public_message: str
    internal_message: str
    retry_after_ms: int
    usage: Usage | None


@dataclass(frozen=True, slots=True)
class FailureOutcome:
    status: LifecycleStatus
    next_attempt_at: datetime | None = None


def _leased(grants: Sequence[LeaseGrant]) -> None:
    metrics.LEASES.inc(len(grants))
    for grant in grants:
        metrics.LEASE_LATENCY.observe(grant.waited_s)


class RuntimeProtocol:
    def __init__(
        self,
        engine: AsyncEngine,
        repository: LifecycleRepository,
        registry: JobRegistry,
        *,
        max_output_bytes: int = 1024 * 1024,
        max_checkpoint_bytes: int = 64 * 1024,
        rng: random.Random | None = None,
    ) -> None:
        self._engine = engine
        self._repo = repository
        self._registry = registry
        self._max_output_bytes = max_output_bytes
        self._max_checkpoint_bytes = max_checkpoint_bytes
        self._rng = rng or random.SystemRandom()

    # -- leases -------------------------------------------------------------------------------

    async def lock(self, job_id: str, runtime_instance_id: str) -> LeasePayload:
        validation.job_id(job_id)
        validation.instance_id(runtime_instance_id)
        grant = await self._repo.lock(job_id, runtime_instance_id)
        _leased([grant])
        async with self._engine.connect() as conn:
            return (await load_payloads(conn, [grant]))[0]

    async def claim(
        self, runtime_instance_id: str, job_types: Sequence[str], limit: int
    ) -> list[LeasePayload]:
        (leases,) = await self.claim_many(job_types, [(runtime_instance_id, limit)])
        return leases

    async def claim_many(
        self,
        job_types: Sequence[str],
        demands: Sequence[tuple[str, int]],
        *,
        conn: AsyncConnection | None = None,
    ) -> list[list[LeasePayload]]:
        """Leases with their payloads for several runtimes of the same job types, per demand;
        in the caller's transaction when ``conn`` is given."""
        granted: list[LeaseGrant] = []

        async def unit(conn: AsyncConnection) -> list[list[LeasePayload]]:
            shares = await self._repo.claim_batches(job_types, demands, conn=conn)
            granted[:] = [grant for share in shares for grant in share]
            # The payloads in the same transaction: one connection and one commit per round.
            payloads = iter(await load_payloads(conn, granted))
            return [[next(payloads) for _ in share] for share in shares]

        if conn is not None:
            return await unit(conn)  # the caller counts the grants once it has committed
        leases = await run_transaction(self._engine, unit)
        _leased(granted)
        return leases

    async def release_undelivered(self, lease: LeasePayload, runtime_instance_id: str) -> bool:
        return await self._repo.release_undelivered(
            lease.job_id, lease.attempt_no, runtime_instance_id
        )

    async def heartbeat(
        self,
        job_id: str,
        attempt_no: int,
        runtime_instance_id: str,
        progress: int,
        checkpoint: bytes,
    ) -> HeartbeatOutcome:
        validation.job_id(job_id)
        validation.attempt_no(attempt_no)
        validation.instance_id(runtime_instance_id)
        validation.progress(progress)
        validation.max_bytes(checkpoint, self._max_checkpoint_bytes, "checkpoint")
        return await self._repo.extend_lease(
            job_id,
            attempt_no,
            runtime_instance_id,
            progress=progress,
            checkpoint=checkpoint or None,
        )

    # -- results ------------------------------------------------------------------------------

    async def submit_result(self, submission: ResultSubmission) -> SubmitOutcome:
        sub = submission
        validation.job_id(sub.job_id)
        validation.attempt_no(sub.attempt_no)
        validation.instance_id(sub.runtime_instance_id)
        validation.output_hash(sub.output_hash)
        validation.max_bytes(sub.output_json, self._max_output_bytes, "output_json")
        output = validation.json_document(sub.output_json, "output_json")
        if output_hash(output) != sub.output_hash:
            raise InvalidRequestError(
                "output_hash is not the SHA-256 of the output's canonical JSON", field="output_hash"
            )
        key = result_idempotency_key(sub.job_id, sub.attempt_no, sub.output_hash)

        async def accept(conn: AsyncConnection) -> JobRecord | None:
            """The accepted job, or None for a repeat of the accepted result."""
            # Read and write on one connection: a second checkout costs two more round trips.
            job = await self._repo.get(sub.job_id, conn=conn)
            if job is None:
                raise JobNotFoundError(sub.job_id)
            if job.resultIdempotencyKey == key:
                return None
            self._check_still_holder(job, sub.attempt_no, sub.runtime_instance_id)
            definition = self._registry.get(job.jobType)
            schema = self._registry.output_schema(job.jobType, job.outputSchemaVersion or None)
            validated = validation.against_schema(
                schema, output, "output", ErrorCode.VALIDATION_FAILED
            )
            context = JobContext(job.id, job.userId, sub.attempt_no, job.targetType, job.targetId)
            # Job row first, then business rows, then the outbox: one lock order for every writer.
            try:
                await self._repo.mark_succeeded(
                    sub.job_id,
                    sub.attempt_no,
                    output_hash=sub.output_hash,
                    result_idempotency_key=key,
                    validated_output=output,
                    runtime_instance_id=sub.runtime_instance_id,
                    conn=conn,
                )
            except LifecycleError:
                # Lost a race since the read (a duplicate submit, a cancel, the reaper): say
                # which, from the row as committed now (READ COMMITTED).
                now = await self._repo.get(sub.job_id, conn=conn)
                if now is not None and now.resultIdempotencyKey == key:
                    return None
                if now is not None and now.lifecycleStatus is LifecycleStatus.SUCCEEDED:
                    raise ResultAlreadyExistsError(sub.job_id) from None
                raise
            await project(conn, definition.projector, context, validated)
            await record_usage(conn, job, sub.attempt_no, sub.usage)
            await add_event(
                conn,
                EventType.COMPLETED,
                job_id=job.id,
                job_type=job.jobType,
                attemptNo=sub.attempt_no,
            )
            return job

        accepted = await run_transaction(self._engine, accept)
        if accepted is None:
            return SubmitOutcome(key, duplicate=True)
        metrics.OUTCOMES.labels("succeeded").inc()
        log.info(
            "result accepted",
            extra={"action": "result_accepted", "jobId": accepted.id, "attemptNo": sub.attempt_no},
        )
        return SubmitOutcome(key, duplicate=False)

    @staticmethod
    def _check_still_holder(job: JobRecord, attempt_no: int, runtime_instance_id: str) -> None:
        if job.attemptCount != attempt_no:
            raise LeaseLostError(job.id, attempt_no, job.lifecycleStatus)
        if job.lifecycleStatus is LifecycleStatus.SUCCEEDED:
            raise ResultAlreadyExistsError(job.id)
        if job.is_terminal:
            raise JobAlreadyTerminalError(job.id, job.lifecycleStatus)
        if (
            job.lifecycleStatus is not LifecycleStatus.RUNNING
            or job.lockedBy != runtime_instance_id
        ):
            raise LeaseLostError(job.id, attempt_no, job.lifecycleStatus)

    # -- failures -----------------------------------------------------------------------------

    async def submit_failure(self, report: FailureReport) -> FailureOutcome:
        validation.job_id(report.job_id)
        validation.attempt_no(report.attempt_no)
        validation.instance_id(report.runtime_instance_id)
        if report.error_code not in ErrorCode.__members__:
            raise InvalidRequestError(
                "error_code is not in the error catalogue", field="error_code"
            )
        if report.retry_after_ms < 0:
            raise InvalidRequestError("retry_after must not be negative", field="retry_after")
        error = JobError(
            report.error_code,
            report.public_message[:500] or "The job failed.",
            report.internal_message[:10_000] or None,
        )
        outcome = await self._settle_failure(
            report.job_id,
            report.attempt_no,
            error,
            retryable=report.retryable,
            retry_after_ms=report.retry_after_ms,
            runtime_instance_id=report.runtime_instance_id,
            usage=report.usage,
        )
        return outcome

    async def _settle_failure(
        self,
        job_id: str,
        attempt_no: int,
        error: JobError,
        *,
        retryable: bool,
        retry_after_ms: int = 0,
        runtime_instance_id: str | None = None,
        usage: Usage | None = None,
        overdue_only: bool = False,
    ) -> FailureOutcome:
        """Requeue, fail or cancel one failed attempt, with its usage and outbox event."""

        async def unit(conn: AsyncConnection) -> FailureOutcome:
            job = await self._repo.get(job_id, conn=conn)
            if job is None:
                raise JobNotFoundError(job_id)
            if runtime_instance_id is not None:
                self._check_still_holder(job, attempt_no, runtime_instance_id)
            if job.cancelRequestedAt is not None:
                await self._repo.mark_cancelled(
                    job_id, attempt_no=attempt_no, overdue_only=overdue_only, conn=conn
                )
                await record_usage(conn, job, attempt_no, usage, error.code)
                await add_event(conn, EventType.CANCELLED, job_id=job_id, job_type=job.jobType)
                return FailureOutcome(LifecycleStatus.CANCELLED)
            backoff = (
                self._registry.get(job.jobType).execution.backoff
                if job.jobType in self._registry
                else _FALLBACK_BACKOFF
            )
            decision = decide(
                attempt_no=attempt_no,
                max_attempts=job.maxAttempts,
                error_code=error.code,
                retryable=retryable,
                retry_after_ms=retry_after_ms,
                backoff=backoff,
                rng=self._rng,
            )
            if decision.retry:
                available_at = await self._repo.requeue_for_retry(
                    job_id,
                    attempt_no,
                    error,
                    delay_ms=decision.delay_ms,
                    runtime_instance_id=runtime_instance_id,
                    overdue_only=overdue_only,
                    conn=conn,
                )
                await record_usage(conn, job, attempt_no, usage, error.code)
                return FailureOutcome(LifecycleStatus.QUEUED, available_at)
            await self._repo.mark_failed(
                job_id,
                attempt_no,
                error,
                runtime_instance_id=runtime_instance_id,
                overdue_only=overdue_only,
                conn=conn,
            )
            await record_usage(conn, job, attempt_no, usage, error.code)
            await add_event(
                conn, EventType.FAILED, job_id=job_id, job_type=job.jobType, errorCode=error.code
            )
            return FailureOutcome(LifecycleStatus.FAILED)

        def counted(outcome: FailureOutcome) -> FailureOutcome:
            if outcome.status is LifecycleStatus.QUEUED:
                metrics.RETRIES.labels(error.code).inc()
            else:
                metrics.OUTCOMES.labels(outcome.status.value).inc()
            return outcome

        # A cancel request that lands between the read and the requeue makes the requeue's guard
        # refuse; the next round reads it and cancels instead.
        for _ in range(3):
            try:
                return counted(await run_transaction(self._engine, unit))
            except IllegalTransitionError:
                continue
        return counted(await run_transaction(self._engine, unit))

    # -- credentials --------------------------------------------------------------------------

    async def resolve_credential(
        self, job_id: str, attempt_no: int, runtime_instance_id: str, store: CredentialStore
    ) -> tuple[str, str]:
        """The user key of a job, for the runtime that holds its lease right now, and only it."""
        validation.job_id(job_id)
        validation.attempt_no(attempt_no)
        validation.instance_id(runtime_instance_id)
        job = await self._repo.get(job_id)
        holds_lease = (
            job is not None
            and job.lifecycleStatus is LifecycleStatus.RUNNING
            and job.attemptCount == attempt_no
            and job.lockedBy == runtime_instance_id
        )
        if job is None or not holds_lease:
            # The same answer for a missing job and a job leased to someone else.
            raise NotLeaseHolderError("this runtime does not hold a lease on that job attempt")
        if job.credentialMode != "user_deepseek_key" or not job.credentialId:
            raise CredentialUnavailableError("the job runs on the platform key")
        return await store.reveal(job.userId, job.credentialId)

    # -- reaper -------------------------------------------------------------------------------

    async def reap_once(self, limit: int = 100) -> int:
        """Take back overdue leases and fail jobs whose start deadline passed; returns how many.

        Safe on every replica at once: each write re-checks, in SQL, that the lease is still
        overdue, so a heartbeat or another reaper that got there first wins.
        """
        settled = 0
        for lease in await self._repo.find_expired_leases(limit=limit):
            if await self._reap(lease):
                settled += 1
        for job_id in await self._repo.find_expired_deadlines(limit=limit):
            if await self._expire(job_id):
                settled += 1
        return settled

    async def _expire(self, job_id: str) -> bool:
        """Fail a queued job whose schedule-to-start deadline passed (JOB_EXPIRED)."""

        async def unit(conn: AsyncConnection) -> None:
            job = await self._repo.get(job_id, conn=conn)
            if job is None:
                return
            await self._repo.expire_queued(job_id, conn=conn)
            await add_event(
                conn,
                EventType.FAILED,
                job_id=job_id,
                job_type=job.jobType,
                errorCode=ErrorCode.JOB_EXPIRED.value,
            )

        try:
            await run_transaction(self._engine, unit)
        except LifecycleError:
            return False  # cancelled or leased meanwhile
        return True

    async def _reap(self, lease: ExpiredLease) -> bool:
        exhausted = lease.attempt_no >= lease.max_attempts
        error = JobError(
            ErrorCode.LEASE_EXPIRED_ATTEMPTS_EXHAUSTED if exhausted else ErrorCode.JOB_TIMEOUT,
            "The job did not finish in time.",
            f"attempt {lease.attempt_no}: lease expired or timeout exceeded",
        )
        try:
            outcome = await self._settle_failure(
                lease.job_id, lease.attempt_no, error, retryable=not exhausted, overdue_only=True
            )
        except (LifecycleError, JobNotFoundError):
            return False  # a heartbeat, a submit or another reaper got there first
        metrics.LEASE_EXPIRIES.labels(outcome.status.value).inc()
        log.info(
            "lease reaped",
            extra={
                "action": "lease_reaped",
                "jobId": lease.job_id,
                "attemptNo": lease.attempt_no,
                "outcome": outcome.status.value,
            },
        )
        return True

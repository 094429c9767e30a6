"""The runtime protocol's core: what Lock, Heartbeat, SubmitResult, SubmitFailure and the reaper
do, on domain types. The gRPC servicer translates protobuf to these calls and back."""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import replace

from scheduler_service.core import validation
from scheduler_service.core.budgets import Budget
from scheduler_service.core.cheap_hours import CheapHours
from scheduler_service.core.errors import (
    CredentialUnavailableError,
    IllegalTransitionError,
    JobNotFoundError,
    LeaseLostError,
    UnleasableJobError,
    UserKeyNotAllowedError,
)
from scheduler_service.core.events import EventType
from scheduler_service.core.fairness import RunningCaps
from scheduler_service.core.job_definitions import USER_KEY_MODE, Backoff
from scheduler_service.core.job_registry import JobRegistry
from scheduler_service.core.lease_tokens import digest
from scheduler_service.core.model_keys import FlowPolicy
from scheduler_service.core.peak_hours import PeakHours
from scheduler_service.core.prices import DEFAULT_PRICES, PriceTable
from scheduler_service.core.provider_ids import ProviderUserIds
from scheduler_service.core.records import (
    HeartbeatOutcome,
    JobError,
    JobRecord,
    LeaseGrant,
    LeasePayload,
)
from scheduler_service.core.retry_policy import MAX_RETRY_AFTER_MS, MAX_WAIVED_ATTEMPTS, decide
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.core.transitions import holds_lease
from scheduler_service.core.usage import Usage
from scheduler_service.ports import CredentialReveal, NewJobRows, Transaction, UnitOfWork
from scheduler_service.services import judging, metrics
from scheduler_service.services.group_commit import GroupCommit, ReportBatcher
from scheduler_service.services.reports import (
    Accepted,
    Answer,
    ChunkReport,
    FailedAttempt,
    FailureOutcome,
    FailureReport,
    HeartbeatReport,
    PreparedResult,
    ResultSubmission,
    SubmitOutcome,
    count_leases,
    counted,
    trace_leases,
)
from scheduler_service.services.resuming import resuming
from scheduler_service.services.user_keys import UserKeyRights
from shared import tracing
from shared.error_codes import ErrorCode

__all__ = [
    "FailedAttempt",
    "FailureOutcome",
    "FailureReport",
    "HeartbeatReport",
    "ResultSubmission",
    "RuntimeProtocol",
    "SubmitOutcome",
]

log = logging.getLogger(__name__)

#: Used for a job whose type is no longer registered (a definition removed while jobs ran).
_FALLBACK_BACKOFF = Backoff(base_ms=5_000)


#: How long a 429 without Retry-After pauses its model key.
_DEFAULT_PAUSE_MS = 1_000


class RuntimeProtocol:
    def __init__(
        self,
        uow: UnitOfWork,
        registry: JobRegistry,
        *,
        max_output_bytes: int = 1024 * 1024,
        max_retry_after_ms: int = MAX_RETRY_AFTER_MS,
        max_waived_attempts: int = MAX_WAIVED_ATTEMPTS,
        running_caps: RunningCaps | None = None,
        flow: FlowPolicy | None = None,
        prices: PriceTable | None = None,
        budget: Budget | None = None,
        user_key_runtimes: Sequence[str] = (),
        rng: random.Random | None = None,
        report_window_s: float = 0.002,
        report_batch_max: int = 200,
        provider_user_ids: ProviderUserIds | None = None,
        cheap_hours: CheapHours | None = None,
        output_chunks_per_attempt: int = 1_000,
    ) -> None:
        #: When off-peak jobs wait (core/cheap_hours.py); by default there is no peak.
        self.cheap_hours = cheap_hours or CheapHours(PeakHours.parse(""), lambda: None)
        #: How a lease names its job's user to the model provider (never the raw id).
        self._provider_user_ids = provider_user_ids or ProviderUserIds()
        #: Users' default daily budget: dispatch skips the jobs of users who spent theirs.
        self._budget = budget
        #: What calls cost: every reported usage is priced here, so budgets and the usage API
        #: count in one currency whatever each runtime was told.
        self._prices = prices or PriceTable.parse(DEFAULT_PRICES)
        #: Which runtimes may run user-key jobs and read user keys.
        self.user_keys = UserKeyRights(user_key_runtimes)
        self._max_retry_after_ms = max_retry_after_ms
        self._max_waived_attempts = max_waived_attempts
        self._running_caps = running_caps
        #: Model keys: their default limits; dispatch spends their budgets, congestion lowers them.
        self.flow = flow or FlowPolicy(user_key_mode=USER_KEY_MODE)
        self._uow = uow
        self._registry = registry
        self._max_output_bytes = max_output_bytes
        self._rng = rng or random.SystemRandom()
        #: Every report, unary or on a stream, is applied by this group commit: the unary calls
        #: of many runtimes share its transactions as the streams' reports do.
        self.reports = ReportBatcher(
            GroupCommit(self, uow, registry, output_chunks_per_attempt, max_output_bytes),
            window_s=report_window_s,
            max_batch=report_batch_max,
        )

    @property
    def uow(self) -> UnitOfWork:
        return self._uow

    def priced(self, job: JobRecord, usage: Usage | None) -> Usage | None:
        """The usage with its cost from the price table (the runtime's own when the table
        does not list the model)."""
        if usage is None:
            return None
        # Priced by the window the attempt started in (its lease): its calls start with it.
        return self._prices.priced(usage, job.modelName, job.lockedAt)

    # -- leases -------------------------------------------------------------------------------

    async def lock(self, job_id: str, runtime_instance_id: str) -> LeasePayload:
        validation.job_id(job_id)
        validation.instance_id(runtime_instance_id)

        async def lock(tx: Transaction) -> tuple[LeaseGrant, LeasePayload | JobError]:
            grant = await tx.jobs.lock(job_id, runtime_instance_id)
            payload = (await tx.reads.lease_payloads([grant]))[0]
            if payload.job_type not in self._registry or await tx.reads.left_to_legacy(job_id):
                # A type System A still owns, or one retired: raised here, the lock rolls back.
                raise UnleasableJobError(
                    job_id, ErrorCode.JOB_TYPE_UNKNOWN, "This kind of job is not run here."
                )
            # Raised inside the transaction: the lock rolls back with it.
            self._check_user_key(payload.credential_mode, runtime_instance_id)
            tx.job_changed(job_id)
            error = judging.unleasable_error(payload)
            if error is not None:
                await self._set_apart_unleasable(tx, [payload], runtime_instance_id)
                return grant, error
            return grant, (await resuming(tx, self._registry, [payload]))[0]

        grant, payload = await self._uow.run(lock)
        if isinstance(payload, JobError):
            raise UnleasableJobError(job_id, ErrorCode(payload.code), payload.public_message)
        count_leases([grant])
        return self._named(payload)

    def _named(self, lease: LeasePayload) -> LeasePayload:
        """``lease`` with its user's pseudonym for the model provider."""
        if not self._provider_user_ids.enabled:
            return lease
        return replace(lease, provider_user_id=self._provider_user_ids.of(lease.user_id))

    async def claim(
        self, runtime_instance_id: str, job_types: Sequence[str], limit: int
    ) -> list[LeasePayload]:
        (leases,) = await self._uow.run(
            lambda tx: self.claim_within(tx, job_types, [(runtime_instance_id, limit)])
        )
        return leases

    async def claim_within(
        self,
        tx: Transaction,
        job_types: Sequence[str],
        demands: Sequence[tuple[str, int]],
        *,
        fresh: NewJobRows | None = None,
    ) -> list[list[LeasePayload]]:
        """Leases with their payloads for several runtimes of the same job types, per demand, in
        ``tx``, counted once it commits; with ``fresh``, of the create's jobs not yet written."""
        started = tracing.now_ns()
        if fresh is not None:  # one a lease could not carry waits for the claim of its row
            fresh = [row for row in fresh if judging.leasable_input(row[1], row[2])]
        shares = await self._claim_shares(tx, job_types, demands, fresh)
        granted = [grant for share in shares for grant in share]
        if granted:
            tx.after_commit(lambda: count_leases(granted))
        # The payloads in the same transaction: one connection and one commit per round.
        payloads = iter(await tx.reads.lease_payloads(granted))
        leases = [
            await resuming(
                tx,
                self._registry,
                await self._set_apart_unleasable(tx, [next(payloads) for _ in share], holder),
            )
            for share, (holder, _) in zip(shares, demands, strict=True)
        ]
        if tracing.enabled():
            held = [
                (lease, holder)
                for (holder, _), share in zip(demands, leases, strict=True)
                for lease in share
            ]
            tx.after_commit(lambda: trace_leases(held, started))
        return leases

    async def _set_apart_unleasable(
        self, tx: Transaction, leases: list[LeasePayload], holder: str
    ) -> list[LeasePayload]:
        """``leases`` without those whose input a lease cannot carry (a legacy row, a row written
        by hand): each of those fails alone, in ``tx``, so it can never end a Poll stream or hold
        up the other jobs of its claim."""
        kept: list[LeasePayload] = []
        for lease in leases:
            error = judging.unleasable_error(lease)
            if error is None:
                kept.append(self._named(lease))
                continue
            failed = FailedAttempt(
                lease.job_id,
                lease.attempt_no,
                error,
                retryable=False,
                runtime_instance_id=holder,
                lease_token=lease.lease_token,
            )
            await self.settle_in(tx, await tx.reads.get(lease.job_id), failed)
            log.warning(
                "a job whose input a lease cannot carry failed",
                extra={"action": "job_unleasable", "jobId": lease.job_id, "code": error.code},
            )
        return kept

    async def _claim_shares(
        self,
        tx: Transaction,
        job_types: Sequence[str],
        demands: Sequence[tuple[str, int]],
        fresh: NewJobRows | None = None,
    ) -> list[list[LeaseGrant]]:
        """Claims for the runtimes allowed user keys and for the others apart, so a user-key
        job only goes to a runtime allowed to run it; in the order of ``demands``. Fresh jobs
        are dealt in one claim (two would deal them twice), with user keys only if all may."""
        allowed = [self.may_use_user_keys(instance) for instance, _ in demands]
        caps = self._running_caps
        defer_ms = self.cheap_hours.defer_ms()
        if all(allowed) or fresh is not None:
            return await tx.jobs.claim_batches(
                job_types,
                demands,
                platform_key_only=not all(allowed),
                running_caps=caps,
                flow=self.flow,
                budget=self._budget,
                defer_ms=defer_ms,
                fresh=fresh,
            )
        shares: list[list[LeaseGrant]] = [[] for _ in demands]
        for flag in (True, False):
            indexes = [i for i, a in enumerate(allowed) if a is flag]
            if not indexes:
                continue
            claimed = await tx.jobs.claim_batches(
                job_types,
                [demands[i] for i in indexes],
                platform_key_only=not flag,
                running_caps=caps,
                flow=self.flow,
                budget=self._budget,
                defer_ms=defer_ms,
            )
            for index, share in zip(indexes, claimed, strict=True):
                shares[index] = share
        return shares

    def may_use_user_keys(self, runtime_instance_id: str) -> bool:
        return self.user_keys.for_claim(runtime_instance_id)

    def stream_subscribed(self, runtime_instance_id: str) -> None:
        self.user_keys.stream_subscribed(runtime_instance_id)

    def _check_user_key(self, credential_mode: str, runtime_instance_id: str) -> None:
        if credential_mode == USER_KEY_MODE and not self.user_keys.for_caller(runtime_instance_id):
            raise UserKeyNotAllowedError("this runtime is not allowed to run jobs on user keys")

    async def release_undelivered(self, lease: LeasePayload, runtime_instance_id: str) -> bool:
        return await self._uow.run(
            lambda tx: tx.jobs.release_undelivered(
                lease.job_id, lease.attempt_no, runtime_instance_id, lease.lease_token
            )
        )

    def prepare_chunk(self, chunk: ChunkReport) -> None:
        """The chunk's checks that need no database."""
        judging.check_chunk(chunk, self._max_output_bytes)

    def prepare_heartbeat(self, beat: HeartbeatReport) -> None:
        """The heartbeat's checks that need no database."""
        judging.check_heartbeat(beat)

    async def heartbeat(self, beat: HeartbeatReport) -> HeartbeatOutcome:
        """A unary Heartbeat: a batch of one in the reports' group commit."""
        outcome = _raised(await self.reports.submit(beat))
        assert isinstance(outcome, HeartbeatOutcome)
        return outcome

    # -- results ------------------------------------------------------------------------------

    def prepare_result(self, sub: ResultSubmission) -> PreparedResult:
        """The request's checks that need no database: ids, sizes, JSON and its hash."""
        return judging.prepared_result(sub, self._max_output_bytes)

    def judge_result(self, job: JobRecord | None, result: PreparedResult) -> Accepted | None:
        """What the job as it is now makes of ``result`` (services/judging.py)."""
        return judging.judged_result(job, result, self._registry)

    async def submit_result(self, submission: ResultSubmission) -> SubmitOutcome:
        """A unary SubmitResult: a batch of one in the reports' group commit."""
        outcome = _raised(await self.reports.submit(submission))
        assert isinstance(outcome, SubmitOutcome)
        return outcome

    # -- failures -----------------------------------------------------------------------------

    def prepare_failure(self, report: FailureReport) -> JobError:
        """The report's checks that need no database; the error it records."""
        return judging.failure_error(report)

    async def submit_failure(self, report: FailureReport) -> FailureOutcome:
        """A unary SubmitFailure: a batch of one in the reports' group commit."""
        outcome = _raised(await self.reports.submit(report))
        assert isinstance(outcome, FailureOutcome)
        return outcome

    def failed_attempt(self, report: FailureReport) -> FailedAttempt:
        """The attempt a runtime's failure report ends (its checks that need no database run)."""
        return FailedAttempt(
            report.job_id,
            report.attempt_no,
            self.prepare_failure(report),
            retryable=report.retryable,
            retry_after_ms=report.retry_after_ms,
            runtime_instance_id=report.runtime_instance_id,
            usage=report.usage,
            lease_token=report.lease_token,
        )

    async def settle_failure(self, failed: FailedAttempt) -> FailureOutcome:
        """Requeue, fail or cancel one failed attempt, with its usage and outbox event."""

        async def settle(tx: Transaction) -> FailureOutcome:
            return await self.settle_in(tx, await tx.reads.get(failed.job_id), failed)

        # A cancel request that lands between the read and the requeue makes the requeue's guard
        # refuse; the next round reads it and cancels instead.
        for _ in range(3):
            try:
                return counted(await self._uow.run(settle), failed.error.code)
            except IllegalTransitionError:
                continue
        return counted(await self._uow.run(settle), failed.error.code)

    async def settle_in(
        self, tx: Transaction, job: JobRecord | None, failed: FailedAttempt
    ) -> FailureOutcome:
        """:meth:`settle_failure` inside ``tx``, given the job as read in it."""
        job_id, attempt_no, error = failed.job_id, failed.attempt_no, failed.error
        holder, overdue_only = failed.runtime_instance_id, failed.overdue_only
        if job is None:
            raise JobNotFoundError(job_id)
        usage = self.priced(job, failed.usage)
        if holder is not None:
            judging.check_still_holder(job, attempt_no, holder, failed.lease_token)
        await self._note_congestion(tx, job, failed)
        if job.cancelRequestedAt is not None:
            await tx.jobs.mark_cancelled(job_id, attempt_no=attempt_no, overdue_only=overdue_only)
            await tx.spend.record_usages([(job, attempt_no, usage, error.code)])
            await tx.emit(EventType.CANCELLED, job_id=job_id, job_type=job.jobType)
            return FailureOutcome(LifecycleStatus.CANCELLED)
        decision = decide(
            attempt_no=attempt_no,
            max_attempts=job.maxAttempts,
            error_code=error.code,
            retryable=failed.retryable,
            retry_after_ms=failed.retry_after_ms,
            backoff=self._backoff_of(job.jobType),
            rng=self._rng,
            max_retry_after_ms=self._max_retry_after_ms,
            waived_attempts=job.waivedAttempts,
            max_waived_attempts=self._max_waived_attempts,
        )
        if decision.retry:
            available_at = await tx.jobs.requeue_for_retry(
                job_id,
                attempt_no,
                error,
                delay_ms=decision.delay_ms,
                runtime_instance_id=holder,
                overdue_only=overdue_only,
                waived=decision.waived,
            )
            await tx.spend.record_usages([(job, attempt_no, usage, error.code)])
            tx.attempt_ended(job_id)
            return FailureOutcome(LifecycleStatus.QUEUED, available_at, error.code)
        await tx.jobs.mark_failed(
            job_id,
            attempt_no,
            error,
            runtime_instance_id=holder,
            overdue_only=overdue_only,
        )
        await tx.spend.record_usages([(job, attempt_no, usage, error.code)])
        await tx.emit(EventType.FAILED, job_id=job_id, job_type=job.jobType, errorCode=error.code)
        return FailureOutcome(LifecycleStatus.FAILED)

    async def _note_congestion(
        self, tx: Transaction, job: JobRecord, failed: FailedAttempt
    ) -> None:
        """A provider's 429 pauses the job's model key fleet-wide until its Retry-After (a
        second when it gave none; capped); a 429 or a provider error lowers its concurrency."""
        await self.note_provider_limits(tx, job, failed.usage)
        code = failed.error.code
        if code == ErrorCode.MODEL_RATE_LIMIT:
            pause = min(max(failed.retry_after_ms, _DEFAULT_PAUSE_MS), self._max_retry_after_ms)
            await tx.keys.congested(job, self.flow, pause)
            key = self.flow.key(job.modelProvider, job.modelName, job.credentialMode)
            tx.after_commit(
                lambda: metrics.MODEL_RATE_LIMITED.labels(key.provider, key.model, key.scope).inc()
            )
        elif code == ErrorCode.TEMPORARY_PROVIDER_ERROR:
            await tx.keys.congested(job, self.flow, None)

    async def note_provider_limits(
        self, tx: Transaction, job: JobRecord, usage: Usage | None
    ) -> None:
        """The provider's headers said the key has nothing left: pause it until the window
        resets (a second when no reset was sent; capped), before the 429s come."""
        if usage is None or usage.exhausted_for_ms is None:
            return
        pause = min(max(usage.exhausted_for_ms, _DEFAULT_PAUSE_MS), self._max_retry_after_ms)
        await tx.keys.paused(job, self.flow, pause)

    def _backoff_of(self, job_type: str) -> Backoff:
        if job_type in self._registry:
            return self._registry.get(job_type).execution.backoff
        return _FALLBACK_BACKOFF

    # -- credentials --------------------------------------------------------------------------

    async def resolve_credential(
        self,
        job_id: str,
        attempt_no: int,
        runtime_instance_id: str,
        lease_token: str,
        store: CredentialReveal,
    ) -> tuple[str, str]:
        """The user key of a job, for the runtime that holds its lease right now (and proves it
        with the lease's token), and only it."""
        validation.job_id(job_id)
        validation.attempt_no(attempt_no)
        validation.instance_id(runtime_instance_id)
        job = await self._uow.read(lambda tx: tx.reads.get(job_id))
        token_hash = digest(lease_token)
        if job is None or not holds_lease(job, attempt_no, runtime_instance_id, token_hash):
            # The same answer for a missing job, a job leased to someone else and a wrong token.
            raise LeaseLostError(job_id, attempt_no)
        self._check_user_key(job.credentialMode, runtime_instance_id)
        if job.credentialMode != USER_KEY_MODE or not job.credentialId:
            raise CredentialUnavailableError("the job runs on the platform key")
        return await store.reveal(job.userId, job.credentialId)


def _raised(answer: Answer) -> Answer:
    """A report's answer as its unary call gives it: the outcome, or the error raised."""
    if isinstance(answer, Exception):
        raise answer
    return answer

"""How an attempt's end is settled: a failed attempt requeued, failed or cancelled with its usage
and event, a provider's limits noted on its model key, a usage priced. Used by the reports'
group commit, the reaper and the claim (a job whose input a lease cannot carry)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler_service.core.breakers import BREAKING_CODES, Breaker, BreakerState
from scheduler_service.core.errors import IllegalTransitionError, JobNotFoundError
from scheduler_service.core.events import EventType
from scheduler_service.core.job_definitions import Backoff
from scheduler_service.core.job_registry import JobRegistry
from scheduler_service.core.model_keys import FlowPolicy
from scheduler_service.core.prices import PriceTable
from scheduler_service.core.records import JobRecord
from scheduler_service.core.retry_policy import MAX_RETRY_AFTER_MS, MAX_WAIVED_ATTEMPTS, decide
from scheduler_service.core.routes import ModelTier, Router
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.core.usage import Usage
from scheduler_service.ports import Transaction, UnitOfWork
from scheduler_service.services import judging, metrics
from scheduler_service.services.reports import (
    FailedAttempt,
    FailureOutcome,
    FailureReport,
    counted,
)
from shared.error_codes import ErrorCode

__all__ = ["RetryLimits", "Settlement"]

#: Used for a job whose type is no longer registered (a definition removed while jobs ran).
_FALLBACK_BACKOFF = Backoff(base_ms=5_000)
#: How long a 429 without Retry-After pauses its model key.
_DEFAULT_PAUSE_MS = 1_000


@dataclass(frozen=True, slots=True)
class RetryLimits:
    """The bounds of a retry: the longest Retry-After honoured, and how many times a job may go
    back to the queue without spending an attempt."""

    max_retry_after_ms: int = MAX_RETRY_AFTER_MS
    max_waived_attempts: int = MAX_WAIVED_ATTEMPTS


class Settlement:
    def __init__(
        self,
        uow: UnitOfWork,
        registry: JobRegistry,
        *,
        prices: PriceTable,
        flow: FlowPolicy,
        limits: RetryLimits,
        rng: random.Random,
        router: Router,
    ) -> None:
        self._uow = uow
        self._registry = registry
        #: What calls cost: every reported usage is priced here, so budgets and the usage API
        #: count in one currency whatever each runtime was told.
        self._prices = prices
        self._flow = flow
        self._limits = limits
        self._rng = rng
        self._router = router

    def priced(self, job: JobRecord, usage: Usage | None) -> Usage | None:
        """The usage with its cost from the price table (the runtime's own when the table
        does not list the model)."""
        if usage is None:
            return None
        # Priced by the window the attempt started in (its lease): its calls start with it.
        return self._prices.priced(usage, job.modelName, job.lockedAt)

    def failed_attempt(self, report: FailureReport) -> FailedAttempt:
        """The attempt a runtime's failure report ends (its checks that need no database run)."""
        return FailedAttempt(
            report.job_id,
            report.attempt_no,
            judging.failure_error(report),
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
        breaker = await self._note_breaker(tx, job, error.code)
        outage = breaker is not None and breaker.state is not BreakerState.CLOSED
        await self._note_congestion(tx, job, failed, outage=outage)
        falls_back = breaker is not None and (outage or self._has_fallback(job))
        if job.cancelRequestedAt is not None:
            await tx.jobs.mark_cancelled(job_id, attempt_no=attempt_no, overdue_only=overdue_only)
            await tx.spend.record_usages([(job, attempt_no, usage, error.code)])
            await tx.emit(
                EventType.CANCELLED,
                job_id=job_id,
                job_type=job.jobType,
                parent_job_id=job.parentJobId,
            )
            return FailureOutcome(LifecycleStatus.CANCELLED)
        decision = decide(
            attempt_no=attempt_no,
            max_attempts=job.maxAttempts,
            error_code=error.code,
            retryable=failed.retryable,
            retry_after_ms=failed.retry_after_ms,
            backoff=self._backoff_of(job.jobType),
            rng=self._rng,
            max_retry_after_ms=self._limits.max_retry_after_ms,
            waived_attempts=job.waivedAttempts,
            max_waived_attempts=self._limits.max_waived_attempts,
            falls_back=falls_back,
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
        await tx.emit(
            EventType.FAILED,
            job_id=job_id,
            job_type=job.jobType,
            parent_job_id=job.parentJobId,
            errorCode=error.code,
        )
        return FailureOutcome(LifecycleStatus.FAILED)

    async def _note_congestion(
        self, tx: Transaction, job: JobRecord, failed: FailedAttempt, *, outage: bool
    ) -> None:
        """A provider's 429 pauses the job's model key fleet-wide until its Retry-After (a
        second when it gave none; capped); a 429 or a provider error lowers its concurrency,
        unless the error is an outage's (the key's breaker is open, or a probe failed): the
        breaker keeps calls away then, and halving the window at each probe would leave the key
        crawling back, one call per round, long after the provider recovered."""
        await self.note_provider_limits(tx, job, failed.usage)
        code = failed.error.code
        if code == ErrorCode.MODEL_RATE_LIMIT:
            pause = self._pause_ms(failed.retry_after_ms)
            await tx.keys.congested(job, self._flow, pause)
            key = self._flow.key(job.modelProvider, job.modelName, job.credentialMode)
            tx.after_commit(
                lambda: metrics.MODEL_RATE_LIMITED.labels(key.provider, key.model, key.scope).inc()
            )
        elif code == ErrorCode.TEMPORARY_PROVIDER_ERROR and not outage:
            await tx.keys.congested(job, self._flow, None)

    async def _note_breaker(self, tx: Transaction, job: JobRecord, code: str) -> Breaker | None:
        """A provider's failure counts against its model key's breaker (core/breakers.py): the
        breaker after it, or None for a failure that is not the provider's."""
        if code not in BREAKING_CODES:
            return None
        router = self._router
        key = router.breaker_key(
            job.modelProvider, job.modelName, job.credentialMode, job.credentialId
        )
        return await tx.routes.breaker_failed(key, code, router.breakers)

    def _has_fallback(self, job: JobRecord) -> bool:
        """Another tier of the job's route can take it. With that, or with its key's breaker
        open, a breaking failure sends the attempt back unspent: the job waits for a tier that
        answers (after a cool-down, or an operator's reset after a 402) instead of spending
        its attempts on probes."""
        tiers = self._router.tiers(
            job.jobType,
            ModelTier(job.modelProvider, job.modelName),
            pinned=job.modelPinned,
            credential_mode=job.credentialMode,
        )
        return len(tiers) > 1

    async def answered(self, tx: Transaction, jobs: Sequence[JobRecord]) -> None:
        """These jobs' calls answered: their keys' breakers close."""
        router = self._router
        keys = {
            router.breaker_key(j.modelProvider, j.modelName, j.credentialMode, j.credentialId)
            for j in jobs
        }
        await tx.routes.breakers_answered(keys)

    async def note_provider_limits(
        self, tx: Transaction, job: JobRecord, usage: Usage | None
    ) -> None:
        """The provider's headers said the key has nothing left: pause it until the window
        resets (a second when no reset was sent; capped), before the 429s come."""
        if usage is None or usage.exhausted_for_ms is None:
            return
        await tx.keys.paused(job, self._flow, self._pause_ms(usage.exhausted_for_ms))

    def _pause_ms(self, asked_ms: int) -> int:
        """A model key's pause: what the provider asked for, at least a second, capped."""
        return min(max(asked_ms, _DEFAULT_PAUSE_MS), self._limits.max_retry_after_ms)

    def _backoff_of(self, job_type: str) -> Backoff:
        if job_type in self._registry:
            return self._registry.get(job_type).execution.backoff
        return _FALLBACK_BACKOFF

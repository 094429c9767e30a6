"""The reaper: takes back leases whose runtime went quiet and fails jobs that missed their start
deadline or whose user's daily budget is spent. Safe on every replica at once: each write
re-checks, in SQL, that the lease is still overdue (or the job still queued), so a heartbeat or
another reaper that got there first wins."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from scheduler_service.core.budgets import Budget
from scheduler_service.core.errors import JobNotFoundError, LifecycleError
from scheduler_service.core.events import EventType
from scheduler_service.core.records import ExpiredLease, JobError, StrandedJob
from scheduler_service.ports import Transaction, UnitOfWork
from scheduler_service.services import metrics
from scheduler_service.services.reports import FailedAttempt
from scheduler_service.services.settlement import Settlement
from shared.error_codes import ErrorCode

__all__ = ["GATE_IDLE_MS", "Reaper"]

#: Gate rows older than this are pruned (about once an hour at the default sweep interval).
GATE_IDLE_MS = 24 * 3_600_000

log = logging.getLogger(__name__)


class Reaper:
    def __init__(
        self,
        uow: UnitOfWork,
        settlement: Settlement,
        *,
        on_reaped: Callable[[str], None] = lambda _holder: None,
        prune_gates_every: int = 720,
        job_types: Collection[str] = (),
        budget: Budget | None = None,
        output_retention_s: float = 300,
        prune_outputs_every: int = 10,
    ) -> None:
        #: Ended jobs' output chunks are deleted this long after the end.
        self._output_retention_ms = round(output_retention_s * 1000)
        self._prune_outputs_every = prune_outputs_every
        #: Users' default daily budget; None: budgets are not swept.
        self._budget = budget
        #: The registered job types; queued or running jobs of any other type are stranded.
        self._job_types = tuple(job_types)
        self._prune_gates_every = prune_gates_every
        self._sweeps = 0
        self._uow = uow
        self._settlement = settlement
        #: Told the holder of each lease taken back: a stream that lets its leases expire
        #: unreported loses slots (services/dispatch.py).
        self._on_reaped = on_reaped

    async def reap_once(self, limit: int = 100) -> int:
        """One sweep; returns how many jobs it settled."""
        settled = 0
        if self._job_types and self._sweeps % self._prune_gates_every == 0:
            # On the first sweep after a start (an upgrade, a retired definition), then hourly;
            # before the leases, so a stranded running job ends instead of being requeued.
            settled += await self.retire_stranded()
        for lease in await self._uow.read(lambda tx: tx.sweeps.expired_leases(limit=limit)):
            if await self._reap(lease):
                settled += 1
        for job_id in await self._uow.read(lambda tx: tx.sweeps.expired_deadlines(limit=limit)):
            if await self._expire(job_id):
                settled += 1
        settled += await self.fail_over_budget(limit)
        self._sweeps += 1
        if self._sweeps % self._prune_gates_every == 0:
            await self.prune_gates()
        if self._sweeps % self._prune_outputs_every == 0:
            await self.prune_outputs()
        return settled

    async def prune_outputs(self) -> int:
        """Delete the output chunks of jobs that ended more than the retention ago (their
        output is in the result); how many jobs' chunks went."""
        retention = self._output_retention_ms
        return await self._uow.run(lambda tx: tx.outputs.prune(retention))

    async def retire_stranded(self) -> int:
        """Fail queued or running jobs whose type is no longer registered (JOB_TYPE_UNKNOWN): no
        runtime may subscribe to them, so they would wait for ever, count against their users'
        caps and pin the oldest-queued gauge."""
        stranded = await self._uow.read(lambda tx: tx.sweeps.stranded_jobs(self._job_types))
        retired = 0
        for job in stranded:
            error = JobError(
                ErrorCode.JOB_TYPE_UNKNOWN,
                "This kind of job is no longer offered.",
                f"job type {job.job_type!r} is not registered",
            )

            async def retire(
                tx: Transaction, job: StrandedJob = job, error: JobError = error
            ) -> bool:
                if not await tx.jobs.retire_stranded(job, error):
                    return False
                await tx.emit(
                    EventType.FAILED,
                    job_id=job.job_id,
                    job_type=job.job_type,
                    parent_job_id=await _parent_of(tx, job.job_id),
                    errorCode=ErrorCode.JOB_TYPE_UNKNOWN.value,
                )
                return True

            if await self._uow.run(retire):
                retired += 1
                log.info(
                    "job of an unregistered type failed",
                    extra={"action": "stranded_job", "jobId": job.job_id, "jobType": job.job_type},
                )
        return retired

    async def fail_over_budget(self, limit: int = 100) -> int:
        """Fail the queued jobs of users whose daily budget is spent (BUDGET_EXCEEDED, with the
        failed event): dispatch skips them, and leaving them queued until midnight would hold
        their users' places and keep whoever waits on them waiting."""
        budget = self._budget
        if budget is None:
            return 0
        failed = 0
        error = JobError(
            ErrorCode.BUDGET_EXCEEDED,
            "The daily budget was spent before the job could start.",
            "the user's spend of today reached their daily budget",
        )
        for job_id, job_type in await self._uow.read(
            lambda tx: tx.spend.over_budget_queued(budget, limit=limit)
        ):

            async def fail(tx: Transaction, job_id: str = job_id, job_type: str = job_type) -> bool:
                if not await tx.jobs.fail_queued(job_id, error):
                    return False  # leased or cancelled meanwhile
                await tx.emit(
                    EventType.FAILED,
                    job_id=job_id,
                    job_type=job_type,
                    parent_job_id=await _parent_of(tx, job_id),
                    errorCode=ErrorCode.BUDGET_EXCEEDED.value,
                )
                return True

            if await self._uow.run(fail):
                failed += 1
        return failed

    async def prune_gates(self) -> int:
        """Drop per-user gate rows not created within a day (ids that came once and went):
        the table would otherwise keep one row per user id ever seen."""
        return await self._uow.run(lambda tx: tx.gates.prune_user_gates(GATE_IDLE_MS))

    async def _expire(self, job_id: str) -> bool:
        """Fail a queued job whose schedule-to-start deadline passed (JOB_EXPIRED)."""

        async def expire(tx: Transaction) -> None:
            job = await tx.reads.get(job_id)
            if job is None:
                return
            await tx.jobs.expire_queued(job_id)
            await tx.emit(
                EventType.FAILED,
                job_id=job_id,
                job_type=job.jobType,
                parent_job_id=job.parentJobId,
                errorCode=ErrorCode.JOB_EXPIRED.value,
            )

        try:
            await self._uow.run(expire)
        except LifecycleError:
            return False  # cancelled or leased meanwhile
        return True

    async def _reap(self, lease: ExpiredLease) -> bool:
        exhausted = lease.attempt_no - lease.waived_attempts >= lease.max_attempts
        error = JobError(
            ErrorCode.LEASE_EXPIRED_ATTEMPTS_EXHAUSTED if exhausted else ErrorCode.JOB_TIMEOUT,
            "The job did not finish in time.",
            f"attempt {lease.attempt_no}: lease expired or timeout exceeded",
        )
        try:
            outcome = await self._settlement.settle_failure(
                FailedAttempt(
                    lease.job_id,
                    lease.attempt_no,
                    error,
                    retryable=not exhausted,
                    overdue_only=True,
                )
            )
        except (LifecycleError, JobNotFoundError):
            return False  # a heartbeat, a submit or another reaper got there first
        metrics.LEASE_EXPIRIES.labels(outcome.status.value).inc()
        if lease.holder:
            self._on_reaped(lease.holder)
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


async def _parent_of(tx: Transaction, job_id: str) -> str | None:
    """The parent of a job ended here (a rare end: one read more), whose counter it moves."""
    job = await tx.reads.get(job_id)
    return job.parentJobId if job is not None else None

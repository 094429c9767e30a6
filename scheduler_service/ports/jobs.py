"""The jobs' ports: the lifecycle writes (:class:`JobStore`, ``tx.jobs``), the reads
(:class:`JobReads`, ``tx.reads``) and the reaper's sweeps (:class:`JobSweeps`, ``tx.sweeps``).

:class:`JobStore` names the primitives an adapter provides (apply one entry of the lifecycle write
table, insert, claim) and builds the lifecycle operations on them, so the SQL store and the
in-memory store of the fast tests run the same operations over the same table.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from scheduler_service.core.budgets import Budget
from scheduler_service.core.errors import JobNotCancellableError, JobNotFoundError, LifecycleError
from scheduler_service.core.fairness import RunningCaps
from scheduler_service.core.lease_tokens import digest, new_lease_token
from scheduler_service.core.model_keys import FlowPolicy
from scheduler_service.core.records import (
    Beat,
    CancelOutcome,
    ExpiredLease,
    HeartbeatOutcome,
    JobError,
    JobFilter,
    JobRecord,
    LeaseGrant,
    LeasePayload,
    LockedRows,
    NewJob,
    Placement,
    StrandedJob,
    Success,
    WatchState,
)
from scheduler_service.core.routes import Router
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.core.transitions import (
    CANCEL,
    CANCEL_QUEUED,
    EXPIRE,
    FAIL,
    HEARTBEAT,
    LOCK,
    RELEASE,
    REQUEST_CANCEL,
    REQUEUE,
    REQUEUE_WAIVED,
    RETIRE,
    SUCCEED,
    LifecycleWrite,
)

__all__ = ["JobReads", "JobStore", "JobSweeps", "NewJobRows"]

#: New jobs with their snapshots and params, as CreateJobs inserts them.
NewJobRows = Sequence[tuple[NewJob, dict[str, Any], dict[str, Any]]]


class JobReads(ABC):
    """What the services read of jobs (in a transaction, or in a read of their own)."""

    @abstractmethod
    async def get(self, job_id: str) -> JobRecord | None: ...

    @abstractmethod
    async def get_many(self, job_ids: Sequence[str]) -> dict[str, JobRecord]: ...

    @abstractmethod
    async def lock_rows(self, job_ids: Collection[str]) -> LockedRows:
        """The jobs ``job_ids`` (those that exist), locked until the transaction ends, with the
        database's moment they were locked at."""

    @abstractmethod
    async def grant_of(self, job_id: str, holder: str) -> LeaseGrant: ...

    @abstractmethod
    async def lease_payloads(self, grants: Sequence[LeaseGrant]) -> list[LeasePayload]: ...

    @abstractmethod
    async def lease_state(self, job_id: str) -> HeartbeatOutcome: ...

    @abstractmethod
    async def available_at(self, job_id: str) -> datetime: ...

    @abstractmethod
    async def ids_by_keys(
        self, keys: Collection[tuple[str, str, str]]
    ) -> dict[tuple[str, str, str], str]:
        """Job ids by (user, job type, idempotency key), for the keys that have one."""

    @abstractmethod
    async def watch_states(self, job_ids: Sequence[str]) -> dict[str, WatchState]:
        """What WatchJob reports of each job (missing jobs are left out)."""

    @abstractmethod
    async def snapshot(self, job_id: str) -> tuple[dict[str, Any], dict[str, Any]]: ...

    @abstractmethod
    async def page(
        self, filters: JobFilter, *, limit: int, before: tuple[datetime, str] | None = None
    ) -> list[JobRecord]:
        """Jobs matching ``filters``, newest first, after the (createdAt, id) cursor."""

    @abstractmethod
    async def awaiting_cancel(self, user_id: str, *, limit: int) -> list[JobRecord]:
        """The user's queued jobs, and running ones not yet asked to stop, newest first."""

    @abstractmethod
    async def clock(self) -> datetime:
        """The database's now (naive UTC)."""

    @abstractmethod
    async def left_to_legacy(self, job_id: str) -> bool:
        """Whether the job is the legacy system's: of a type it still owns, or a row its producer
        inserted that the engine has not taken in yet (sql/legacy_adoption.py)."""


class JobSweeps(ABC):
    """What the reaper looks for: jobs a sweep must end or take back."""

    @abstractmethod
    async def expired_leases(self, *, limit: int = 100) -> list[ExpiredLease]: ...

    @abstractmethod
    async def expired_deadlines(self, *, limit: int = 100) -> list[str]: ...

    @abstractmethod
    async def cancel_requested_held_by(
        self, holders: Collection[str]
    ) -> list[tuple[str, int, str]]: ...

    @abstractmethod
    async def stranded_jobs(
        self, registered: Collection[str], *, limit: int = 100
    ) -> list[StrandedJob]:
        """Queued or running jobs whose type is not in ``registered``."""


class JobStore(ABC):
    """The lifecycle writes, each one entry of the write table; bound to one transaction."""

    def __init__(self, reads: JobReads) -> None:
        #: The same transaction's reads, for the answers the writes give.
        self._reads = reads

    # -- primitives: what an adapter provides -------------------------------------------------

    @abstractmethod
    async def apply(
        self, write: LifecycleWrite, job_id: str, *, overdue_only: bool = False, **params: Any
    ) -> bool:
        """Run one entry of the write table on ``job_id``; raise its explained miss, or return
        False for a quiet one. ``params``: ``attempt``, ``holder``, ``owner`` (guards; None
        leaves the guard off), ``*_ms`` clock offsets, and the write's values by name."""

    @abstractmethod
    async def create_many(
        self,
        jobs: NewJobRows,
        places: Sequence[int],
        *,
        leased: Mapping[str, Placement] | None = None,
    ) -> dict[str, JobRecord] | None:
        """Insert ``jobs`` as queued with their snapshots, at their fair ``places``
        (:meth:`~scheduler_service.ports.gates.GateStore.fair_places`); those in ``leased``
        (by job id) already leased, their first attempt running (the lock write applied: a
        ``claim_batches`` of ``fresh`` jobs placed them). The rows as written, by job id, where
        the insert can answer them; None where they are to be read."""

    @abstractmethod
    async def claim_batches(
        self,
        job_types: Sequence[str],
        demands: Sequence[tuple[str, int]],
        *,
        platform_key_only: bool = False,
        running_caps: RunningCaps | None = None,
        flow: FlowPolicy | None = None,
        budget: Budget | None = None,
        defer_ms: int = 0,
        fresh: NewJobRows | None = None,
        router: Router | None = None,
    ) -> list[list[LeaseGrant]]:
        """Lease the best available jobs of ``job_types`` to several runtimes: ``demands`` are
        (runtime instance id, how many); the answer holds each one's grants, in order. With
        ``platform_key_only``, jobs that run on a user's key are left for other runtimes; with
        ``running_caps``, jobs of users at their cap of running jobs stay queued; with ``flow``,
        jobs whose model key has no budget (scheduler_service/core/model_keys.py) stay queued; with
        ``budget``, jobs of users who spent theirs stay queued; while ``defer_ms`` > 0 (a peak
        window lasts that long), off-peak jobs whose deadline can wait stay queued; with a
        ``router``, each job leases on the first tier of its route whose circuit breaker admits
        a call (scheduler_service/core/routes.py), and stays queued when none does.

        With ``fresh`` (jobs this transaction is about to insert), the grants are of those
        jobs, judged the same way, and only when no queued job could be claimed (it would go
        first): the caller inserts them leased (``create_many(leased=...)``). An adapter may
        grant none; the jobs are then inserted queued and claimed as any other."""

    @abstractmethod
    async def keep_alive(self, holders: Collection[str]) -> int:
        """KEEP_ALIVE: extend every lease the runtimes ``holders`` hold (within its grace);
        returns how many."""

    # -- batches: set-based where the adapter can, one write at a time otherwise ----------------

    async def succeed_many(self, items: Sequence[Success]) -> None:
        """The SUCCEED write for jobs whose results were judged on locked rows."""
        for item in items:
            await self.apply(
                SUCCEED,
                item.job_id,
                attempt=item.attempt_no,
                holder=item.holder,
                outputHash=item.output_hash,
                resultIdempotencyKey=item.key,
                validatedOutput=item.output,
            )

    async def extend_leases(
        self, items: Sequence[Beat], judged_at: datetime
    ) -> dict[str, HeartbeatOutcome]:
        """The HEARTBEAT write for leases judged alive on locked rows at ``judged_at`` (the
        database's moment read with the locks): its grace is counted to that moment."""
        extended = {}
        for item in items:
            extra: dict[str, Any] = {} if item.progress is None else {"progress": item.progress}
            await self.apply(
                HEARTBEAT, item.job_id, attempt=item.attempt_no, holder=item.holder, **extra
            )
            extended[item.job_id] = await self._reads.lease_state(item.job_id)
        return extended

    # -- the lifecycle, on the write table ------------------------------------------------------

    async def lock(self, job_id: str, runtime_instance_id: str) -> LeaseGrant:
        """queued → running for ``runtime_instance_id``, if the job is available now."""
        token = new_lease_token()
        await self.apply(LOCK, job_id, lockedBy=runtime_instance_id, leaseTokenHash=digest(token))
        grant = await self._reads.grant_of(job_id, runtime_instance_id)
        return dataclasses.replace(grant, lease_token=token)

    async def release_undelivered(
        self, job_id: str, attempt_no: int, runtime_instance_id: str, lease_token: str
    ) -> bool:
        """Give back that very lease (its token names it: the attempt number is reused) if it
        never reached its runtime; False if it was heartbeated or is gone."""
        return await self.apply(
            RELEASE,
            job_id,
            attempt=attempt_no,
            holder=runtime_instance_id,
            token=digest(lease_token),
        )

    async def requeue_for_retry(
        self,
        job_id: str,
        attempt_no: int,
        error: JobError,
        *,
        delay_ms: int,
        runtime_instance_id: str | None = None,
        overdue_only: bool = False,
        waived: bool = False,
    ) -> datetime:
        """running → queued for another attempt after ``delay_ms``; returns ``availableAt``.
        A ``waived`` attempt goes back unspent (REQUEUE_WAIVED).

        Refuses when no attempt is left or a cancel was requested (those end the job instead).
        """
        await self.apply(
            REQUEUE_WAIVED if waived else REQUEUE,
            job_id,
            overdue_only=overdue_only,
            attempt=attempt_no,
            holder=runtime_instance_id,
            delay_ms=max(0, delay_ms),
            **_error_values(error),
        )
        return await self._reads.available_at(job_id)

    async def mark_failed(
        self,
        job_id: str,
        attempt_no: int,
        error: JobError,
        *,
        runtime_instance_id: str | None = None,
        overdue_only: bool = False,
    ) -> None:
        """running → failed for ``attempt_no`` with the error fields."""
        await self.apply(
            FAIL,
            job_id,
            overdue_only=overdue_only,
            attempt=attempt_no,
            holder=runtime_instance_id,
            **_error_values(error),
        )

    async def mark_cancelled(
        self, job_id: str, *, attempt_no: int | None = None, overdue_only: bool = False
    ) -> None:
        """→ cancelled from queued, or from running once a cancel was requested (with
        ``attempt_no``, only while that attempt holds it)."""
        await self.apply(CANCEL, job_id, overdue_only=overdue_only, attempt=attempt_no)

    async def retire_stranded(self, job: StrandedJob, error: JobError) -> bool:
        """End a job of a type no longer registered: failed from queued, or from running for
        the attempt it is at (a legacy ``processing`` row is at attempt 0). False if it moved."""
        if job.status is LifecycleStatus.QUEUED:
            return await self.apply(RETIRE, job.job_id, **_error_values(error))
        try:
            await self.apply(FAIL, job.job_id, attempt=job.attempt_no, **_error_values(error))
        except LifecycleError:
            return False
        return True

    async def fail_queued(self, job_id: str, error: JobError) -> bool:
        """queued → failed with ``error`` (a budget spent); False if the job moved meanwhile."""
        return await self.apply(RETIRE, job_id, **_error_values(error))

    async def expire_queued(self, job_id: str) -> None:
        """queued → failed (JOB_EXPIRED) for a job whose schedule-to-start deadline passed."""
        await self.apply(EXPIRE, job_id)

    async def request_cancellation(
        self, job_id: str, *, user_id: str | None = None
    ) -> CancelOutcome:
        """Cancel a queued job at once, or flag a running one for its runtime to stop.

        With ``user_id`` only that user's job matches; another user's job is "not found".
        """
        # Each round is two guarded UPDATEs; a job that moved from queued to running between
        # them is caught by the next round.
        for _ in range(3):
            if await self.apply(CANCEL_QUEUED, job_id, owner=user_id):
                return CancelOutcome.CANCELLED
            if await self.apply(REQUEST_CANCEL, job_id, owner=user_id):
                return CancelOutcome.CANCEL_REQUESTED
            job = await self._reads.get(job_id)
            if job is None or (user_id is not None and job.userId != user_id):
                raise JobNotFoundError(job_id)
            if job.is_terminal:
                raise JobNotCancellableError(job_id, job.lifecycleStatus)
        raise JobNotCancellableError(job_id, "changing")


def _error_values(error: JobError) -> dict[str, Any]:
    return {
        "errorCode": error.code,
        "publicErrorMessage": error.public_message,
        "internalErrorMessage": error.internal_message,
    }

"""The job store: every read and write of jobs the services make, on domain types.

:class:`JobStore` names the primitives an adapter provides (apply one entry of the lifecycle
write table, insert, claim, read) and builds the lifecycle operations on them, so the SQL store
and the in-memory store of the fast tests run the same operations over the same table. Each store
is bound to one transaction (``tx.jobs``).
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from scheduler_service.billing.budgets import Budget, Standing
from scheduler_service.errors import JobNotCancellableError, JobNotFoundError, LifecycleError
from scheduler_service.flow.keys import FlowPolicy
from scheduler_service.lifecycle.fairness import RunningCaps
from scheduler_service.lifecycle.lease_tokens import digest, new_lease_token
from scheduler_service.lifecycle.records import (
    ArtifactRow,
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
    StrandedJob,
    Success,
    Usage,
    WatchState,
)
from scheduler_service.lifecycle.state_machine import LifecycleStatus
from scheduler_service.lifecycle.transitions import (
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

__all__ = ["JobStore"]


class JobStore(ABC):
    # -- primitives: what an adapter provides -------------------------------------------------

    @abstractmethod
    async def apply(
        self, write: LifecycleWrite, job_id: str, *, overdue_only: bool = False, **params: Any
    ) -> bool:
        """Run one entry of the write table on ``job_id``; raise its explained miss, or return
        False for a quiet one. ``params``: ``attempt``, ``holder``, ``owner`` (guards; None
        leaves the guard off), ``*_ms`` clock offsets, and the write's values by name."""

    @abstractmethod
    async def get(self, job_id: str) -> JobRecord | None: ...

    @abstractmethod
    async def create(
        self,
        job: NewJob,
        snapshot: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        """Insert ``job`` as queued, with its input snapshot when given."""

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
    ) -> list[list[LeaseGrant]]:
        """Lease the best available jobs of ``job_types`` to several runtimes: ``demands`` are
        (runtime instance id, how many); the answer holds each one's grants, in order. With
        ``platform_key_only``, jobs that run on a user's key are left for other runtimes; with
        ``running_caps``, jobs of users at their cap of running jobs stay queued; with ``flow``,
        jobs whose model key has no budget (scheduler_service/flow/keys.py) stay queued."""

    async def model_congested(
        self, job: JobRecord, flow: FlowPolicy, retry_after_ms: int | None
    ) -> None:
        """A call of ``job``'s model key met congestion: a 429 (pause the key for
        ``retry_after_ms``) or a 503 (``None``); its concurrency halves. Stores without model
        keys ignore it."""
        return None

    async def model_paused(self, job: JobRecord, flow: FlowPolicy, pause_ms: int) -> None:
        """The provider said ``job``'s model key has nothing left for ``pause_ms``: no lease on it
        before then (its concurrency is left alone: this is not congestion)."""
        return None

    async def model_answered(
        self, answers: Sequence[tuple[JobRecord, Usage | None]], flow: FlowPolicy
    ) -> None:
        """These jobs' calls answered (with their usage): their keys' windows grow back, or
        shrink when the first tokens came slow."""
        return None

    @abstractmethod
    async def grant_of(self, job_id: str, holder: str) -> LeaseGrant: ...

    @abstractmethod
    async def lease_payloads(self, grants: Sequence[LeaseGrant]) -> list[LeasePayload]: ...

    @abstractmethod
    async def id_by_key(self, user_id: str, job_type: str, key: str) -> str | None: ...

    @abstractmethod
    async def lock_user_gate(self, user_id: str) -> tuple[int, int]:
        """Serialise this user's creates until commit; returns (active jobs, jobs created
        today)."""

    async def create_many(
        self, jobs: Sequence[tuple[NewJob, dict[str, Any], dict[str, Any]]]
    ) -> None:
        """Several new jobs with their snapshots (a store may write them set-based)."""
        for job, snapshot, params in jobs:
            await self.create(job, snapshot, params)

    async def get_many(self, job_ids: Sequence[str]) -> dict[str, JobRecord]:
        found = {job_id: await self.get(job_id) for job_id in job_ids}
        return {job_id: job for job_id, job in found.items() if job is not None}

    async def ids_by_keys(
        self, keys: Collection[tuple[str, str, str]]
    ) -> dict[tuple[str, str, str], str]:
        """Job ids by (user, job type, idempotency key), for the keys that have one."""
        found = {key: await self.id_by_key(*key) for key in keys}
        return {key: job_id for key, job_id in found.items() if job_id is not None}

    async def lock_user_gates(self, user_ids: Collection[str]) -> dict[str, tuple[int, int]]:
        """:meth:`lock_user_gate` for several users (in one order, so two batches cannot
        deadlock on each other's gates)."""
        return {user: await self.lock_user_gate(user) for user in sorted(set(user_ids))}

    @abstractmethod
    async def watch_states(self, job_ids: Sequence[str]) -> dict[str, WatchState]:
        """What WatchJob reports of each job (missing jobs are left out)."""

    @abstractmethod
    async def prune_user_gates(self, idle_ms: int, *, limit: int = 500) -> int:
        """Delete up to ``limit`` gate rows created more than ``idle_ms`` ago; how many went.
        A user's next create puts theirs back: the rows only serialise creates."""

    @abstractmethod
    async def artifacts(self, job_id: str) -> list[ArtifactRow]: ...

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
    async def expired_leases(self, *, limit: int = 100) -> list[ExpiredLease]: ...

    @abstractmethod
    async def expired_deadlines(self, *, limit: int = 100) -> list[str]: ...

    @abstractmethod
    async def cancel_requested_held_by(
        self, holders: Collection[str]
    ) -> list[tuple[str, int, str]]: ...

    @abstractmethod
    async def project(
        self, projector: str, job: JobRecord, attempt_no: int, output: BaseModel
    ) -> None:
        """Write the business rows and artifacts of a validated output."""

    @abstractmethod
    async def record_usage(
        self, job: JobRecord, attempt_no: int, usage: Usage | None, error_code: str | None = None
    ) -> None: ...

    @abstractmethod
    async def lease_state(self, job_id: str) -> HeartbeatOutcome: ...

    @abstractmethod
    async def available_at(self, job_id: str) -> datetime: ...

    @abstractmethod
    async def lock_rows(self, job_ids: Collection[str]) -> LockedRows:
        """The jobs ``job_ids`` (those that exist), locked until the transaction ends."""

    @abstractmethod
    async def keep_alive(self, holders: Collection[str]) -> int:
        """KEEP_ALIVE: extend every lease the runtimes ``holders`` hold (within its grace);
        returns how many."""

    # -- batches: set-based where the adapter can, one write at a time otherwise ----------------

    async def succeed_many(self, items: Sequence[Success]) -> None:
        """The SUCCEED write for jobs whose results were judged on locked rows."""
        for item in items:
            await self.mark_succeeded(
                item.job_id,
                item.attempt_no,
                output_hash=item.output_hash,
                result_idempotency_key=item.key,
                validated_output=item.output,
                runtime_instance_id=item.holder,
            )

    async def extend_leases(
        self, items: Sequence[Beat], judged_at: datetime
    ) -> dict[str, HeartbeatOutcome]:
        """The HEARTBEAT write for leases judged alive on locked rows at ``judged_at`` (the
        database's moment read with the locks): its grace is counted to that moment."""
        return {
            item.job_id: await self.extend_lease(
                item.job_id,
                item.attempt_no,
                item.holder,
                progress=item.progress,
            )
            for item in items
        }

    async def project_many(self, items: Sequence[tuple[str, JobRecord, int, BaseModel]]) -> None:
        for projector, job, attempt_no, output in items:
            await self.project(projector, job, attempt_no, output)

    async def record_usage_many(
        self, entries: Sequence[tuple[JobRecord, int, Usage | None, str | None]]
    ) -> None:
        for job, attempt_no, usage, error_code in entries:
            await self.record_usage(job, attempt_no, usage, error_code)

    # -- the lifecycle, on the write table ------------------------------------------------------

    async def lock(self, job_id: str, runtime_instance_id: str) -> LeaseGrant:
        """queued → running for ``runtime_instance_id``, if the job is available now."""
        token = new_lease_token()
        await self.apply(LOCK, job_id, lockedBy=runtime_instance_id, leaseTokenHash=digest(token))
        grant = await self.grant_of(job_id, runtime_instance_id)
        return dataclasses.replace(grant, lease_token=token)

    async def extend_lease(
        self,
        job_id: str,
        attempt_no: int,
        runtime_instance_id: str,
        *,
        progress: int | None = None,
        lease_token: str | None = None,
    ) -> HeartbeatOutcome:
        """Extend the holder's lease to now + lease TTL; a lease past its grace is lost even
        before the reaper takes it back. With ``lease_token``, only for the caller that holds
        the lease's token."""
        extra: dict[str, Any] = {}
        if progress is not None:
            extra["progress"] = progress
        if lease_token is not None:
            extra["token"] = digest(lease_token)
        await self.apply(HEARTBEAT, job_id, attempt=attempt_no, holder=runtime_instance_id, **extra)
        return await self.lease_state(job_id)

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
        return await self.available_at(job_id)

    async def mark_succeeded(
        self,
        job_id: str,
        attempt_no: int,
        *,
        output_hash: str,
        result_idempotency_key: str,
        validated_output: Any = None,
        runtime_instance_id: str | None = None,
    ) -> None:
        """running → succeeded for ``attempt_no``; clears the error fields."""
        await self.apply(
            SUCCEED,
            job_id,
            attempt=attempt_no,
            holder=runtime_instance_id,
            outputHash=output_hash,
            resultIdempotencyKey=result_idempotency_key,
            validatedOutput=validated_output,
        )

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

    @abstractmethod
    async def stranded_jobs(
        self, registered: Collection[str], *, limit: int = 100
    ) -> list[StrandedJob]:
        """Queued or running jobs whose type is not in ``registered``."""

    @abstractmethod
    async def clock(self) -> datetime:
        """The database's now (naive UTC)."""

    async def fail_queued(self, job_id: str, error: JobError) -> bool:
        """queued → failed with ``error`` (a budget spent); False if the job moved meanwhile."""
        return await self.apply(RETIRE, job_id, **_error_values(error))

    async def over_budget(self, user_ids: Collection[str], budget: Budget) -> set[str]:
        """Those users whose spend of today reached their budget."""
        return set()

    async def budget_standings(
        self, user_ids: Collection[str], budget: Budget, reserving: Collection[str]
    ) -> dict[str, Standing]:
        """Those users with a budget: it, their spend today, and the token estimates of their
        jobs in the ``reserving`` states (billing/budgets.py)."""
        return {}

    async def over_budget_queued(
        self, budget: Budget, *, limit: int = 100
    ) -> list[tuple[str, str]]:
        """(job id, job type) of queued jobs whose users are over budget today."""
        return []

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
            job = await self.get(job_id)
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

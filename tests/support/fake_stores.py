"""The in-memory jobs stores of the fast tests: the lifecycle writes, reads and sweeps over
:class:`~tests.support.fake_state.FakeState`, interpreting the same lifecycle write table the SQL
store compiles (``scheduler_service/core/transitions.py``) with the same guards
(``scheduler_service/core/guards.py``), on a clock the test moves."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from scheduler_service.core.budgets import Budget, admit_within_budgets
from scheduler_service.core.cheap_hours import OFF_PEAK
from scheduler_service.core.errors import DuplicateKeyError
from scheduler_service.core.fairness import RunningCaps
from scheduler_service.core.guards import holds, matches
from scheduler_service.core.job_definitions import USER_KEY_MODE
from scheduler_service.core.lease_tokens import digest, new_lease_token
from scheduler_service.core.model_keys import FlowPolicy
from scheduler_service.core.records import (
    RECORD_FIELDS,
    ExpiredLease,
    HeartbeatOutcome,
    JobFilter,
    JobRecord,
    LeaseGrant,
    LeasePayload,
    LockedRows,
    NewJob,
    Placement,
    StrandedJob,
    WatchState,
)
from scheduler_service.core.routes import Router
from scheduler_service.core.state_machine import LifecycleStatus, legacy_status_of
from scheduler_service.core.transitions import (
    KEEP_ALIVE,
    LOCK,
    Guard,
    KeepOrNow,
    LifecycleWrite,
    Now,
    Param,
    Plus,
    PlusParam,
    explain_miss,
)
from scheduler_service.ports import JobReads, JobStore, JobSweeps, NewJobRows
from scheduler_service.sql.claims import deal
from tests.support.fake_state import QUEUED as _Q
from tests.support.fake_state import RUNNING as _R
from tests.support.fake_state import FakeTables, Row


def _waits(row: Row, defer_ms: int, now: datetime) -> bool:
    """As the SQL claim: an off-peak job waits out a peak window lasting ``defer_ms`` more
    unless its deadline comes before the window's end plus its attempts' time."""
    if row["costPolicy"] != OFF_PEAK or defer_ms <= 0:
        return False
    room = timedelta(milliseconds=defer_ms + row["maxAttempts"] * row["timeoutMs"])
    deadline = row["deadlineAt"]
    return deadline is None or deadline > now + room


__all__ = ["FakeJobReads", "FakeJobStore", "FakeJobSweeps"]


class FakeJobReads(FakeTables, JobReads):
    async def get(self, job_id: str) -> JobRecord | None:
        row = self.state.jobs.get(job_id)
        return None if row is None else JobRecord.from_mapping(row)

    async def get_many(self, job_ids: Sequence[str]) -> dict[str, JobRecord]:
        found = {job_id: await self.get(job_id) for job_id in job_ids}
        return {job_id: job for job_id, job in found.items() if job is not None}

    async def lock_rows(self, job_ids: Collection[str]) -> LockedRows:
        jobs = await self.get_many(list(job_ids))
        return LockedRows(self.now, jobs, self.ttl_ms, self.grace_ms)

    async def grant_of(self, job_id: str, holder: str) -> LeaseGrant:
        row = self.state.jobs[job_id]
        assert row["lockedBy"] == holder
        waited = (row["lockedAt"] - row["availableAt"]).total_seconds()
        return LeaseGrant(job_id, row["attemptCount"], row["lockUntil"], max(0.0, waited))

    async def lease_payloads(self, grants: Sequence[LeaseGrant]) -> list[LeasePayload]:
        payloads = []
        for grant in grants:
            row = self.state.jobs[grant.job_id]
            snapshot, params = self.state.snapshots.get(grant.job_id, ({}, {}))
            payloads.append(
                LeasePayload(
                    job_id=grant.job_id,
                    job_type=row["jobType"],
                    attempt_no=grant.attempt_no,
                    lock_until=grant.lock_until,
                    timeout_ms=row["timeoutMs"],
                    snapshot=snapshot,
                    params=params,
                    prompt_key=row["promptKey"] or "",
                    prompt_version=row["promptVersion"] or "",
                    model_name=row["modelName"],
                    credential_mode=row["credentialMode"],
                    credential_id=row["credentialId"] or "",
                    output_schema_version=row["outputSchemaVersion"] or "",
                    lease_token=grant.lease_token,
                    reasoning_effort=row["reasoningEffort"] or "off",
                    tell_first_token=row["prefixKey"] is not None,
                    model_provider=row["modelProvider"],
                    model_tier=row["modelTier"],
                )
            )
        return payloads

    async def lease_state(self, job_id: str) -> HeartbeatOutcome:
        row = self.state.jobs[job_id]
        return HeartbeatOutcome(row["lockUntil"], row["cancelRequestedAt"] is not None)

    async def available_at(self, job_id: str) -> datetime:
        available: datetime = self.state.jobs[job_id]["availableAt"]
        return available

    async def ids_by_keys(
        self, keys: Collection[tuple[str, str, str]]
    ) -> dict[tuple[str, str, str], str]:
        wanted = set(keys)
        return {
            key: str(row["id"])
            for row in self.state.jobs.values()
            if (key := (row["userId"], row["jobType"], row["idempotencyKey"])) in wanted
        }

    async def watch_states(self, job_ids: Sequence[str]) -> dict[str, WatchState]:
        return {
            job_id: JobRecord.from_mapping(self.state.jobs[job_id]).watch_state()
            for job_id in job_ids
            if job_id in self.state.jobs
        }

    async def snapshot(self, job_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.state.snapshots.get(job_id, ({}, {}))

    async def page(
        self, filters: JobFilter, *, limit: int, before: tuple[datetime, str] | None = None
    ) -> list[JobRecord]:
        def wanted(r: Row) -> bool:
            return (
                (filters.user_id is None or r["userId"] == filters.user_id)
                and (not filters.job_type or r["jobType"] == filters.job_type)
                and (
                    not filters.lifecycle_status or r["lifecycleStatus"] == filters.lifecycle_status
                )
                and (not filters.queue_name or r["queueName"] == filters.queue_name)
                and (filters.created_after is None or r["createdAt"] >= filters.created_after)
                and (filters.created_before is None or r["createdAt"] < filters.created_before)
                and (not filters.error_code or r.get("errorCode") == filters.error_code)
                and (before is None or (r["createdAt"], r["id"]) < before)
            )

        return self._newest_first(wanted, limit)

    async def awaiting_cancel(self, user_id: str, *, limit: int) -> list[JobRecord]:
        def wanted(r: Row) -> bool:
            return r["userId"] == user_id and (
                r["lifecycleStatus"] == _Q
                or (r["lifecycleStatus"] == _R and r["cancelRequestedAt"] is None)
            )

        return self._newest_first(wanted, limit)

    def _newest_first(self, wanted: Callable[[Row], bool], limit: int) -> list[JobRecord]:
        rows = sorted(
            (r for r in self.state.jobs.values() if wanted(r)),
            key=lambda r: (r["createdAt"], r["id"]),
            reverse=True,
        )
        return [JobRecord.from_mapping(r) for r in rows[:limit]]

    async def clock(self) -> datetime:
        return self.now

    async def left_to_legacy(self, job_id: str) -> bool:
        return False  # the in-memory tables hold no System A rows


class FakeJobSweeps(FakeTables, JobSweeps):
    async def expired_leases(self, *, limit: int = 100) -> list[ExpiredLease]:
        rows = [
            r
            for r in self.state.jobs.values()
            if r["lifecycleStatus"] == _R and holds(Guard.OVERDUE, r, {}, self.moment)
        ]
        rows.sort(key=lambda r: r["lockUntil"])
        return [
            ExpiredLease(
                r["id"],
                r["jobType"],
                r["attemptCount"],
                r["maxAttempts"],
                r["cancelRequestedAt"] is not None,
                r["lockedBy"],
                r["waivedAttempts"],
            )
            for r in rows[:limit]
        ]

    async def stranded_jobs(
        self, registered: Collection[str], *, limit: int = 100
    ) -> list[StrandedJob]:
        return [
            StrandedJob(
                r["id"], r["jobType"], LifecycleStatus(r["lifecycleStatus"]), r["attemptCount"]
            )
            for r in self.state.jobs.values()
            if r["lifecycleStatus"] in (_Q, _R) and r["jobType"] not in registered
        ][:limit]

    async def expired_deadlines(self, *, limit: int = 100) -> list[str]:
        return [
            r["id"]
            for r in self.state.jobs.values()
            if r["lifecycleStatus"] == _Q and holds(Guard.DEADLINE_PASSED, r, {}, self.moment)
        ][:limit]

    async def cancel_requested_held_by(
        self, holders: Collection[str]
    ) -> list[tuple[str, int, str]]:
        return [
            (r["id"], r["attemptCount"], r["lockedBy"])
            for r in self.state.jobs.values()
            if r["lifecycleStatus"] == _R
            and r["cancelRequestedAt"] is not None
            and r["lockedBy"] in holders
        ]


class FakeJobStore(FakeTables, JobStore):
    """The lifecycle writes; budgets and model keys take part in its claims as in SQL's."""

    def __init__(self, reads: FakeJobReads, keys: Any, spend: Any) -> None:
        FakeTables.__init__(
            self, reads.state, reads._clock, ttl_ms=reads.ttl_ms, grace_ms=reads.grace_ms
        )
        JobStore.__init__(self, reads)
        self._keys = keys
        self._spend = spend

    def _set(self, write: LifecycleWrite, row: Row, params: dict[str, Any]) -> None:
        updates: Row = {}
        for column, value in write.all_values.items():
            match value:
                case Now(offset=None):
                    updates[column] = self.now
                case Now(offset="lease_ttl_ms"):
                    updates[column] = self.ms_from_now(self.ttl_ms)
                case Now(offset=str(name)):
                    updates[column] = self.ms_from_now(params[name])
                case Param(name=name, optional=optional):
                    if name in params:
                        updates[column] = params[name]
                    elif not optional:
                        raise KeyError(name)
                case Plus(amount=amount):
                    updates[column] = row[column] + amount
                case PlusParam(name=name):
                    updates[column] = row[column] + params[name]
                case KeepOrNow():
                    updates[column] = row[column] or self.now
                case _:
                    updates[column] = value
        row.update(updates)

    async def apply(
        self, write: LifecycleWrite, job_id: str, *, overdue_only: bool = False, **params: Any
    ) -> bool:
        row = self.state.jobs.get(job_id)
        if row is not None and matches(write, row, params, self.moment, overdue_only=overdue_only):
            self._set(write, row, params)
            return True
        miss = explain_miss(write, job_id, await self._reads.get(job_id), params)
        if miss is None:
            return False
        raise miss

    async def keep_alive(self, holders: Collection[str]) -> int:
        kept = 0
        for row in self.state.jobs.values():
            if row["lockedBy"] in holders and matches(KEEP_ALIVE, row, {}, self.moment):
                self._set(KEEP_ALIVE, row, {})
                kept += 1
        return kept

    async def create_many(
        self,
        jobs: NewJobRows,
        places: Sequence[int],
        *,
        leased: Mapping[str, Placement] | None = None,
    ) -> dict[str, JobRecord] | None:
        # claim_batches grants no fresh job here: nothing is ever inserted leased.
        assert not leased
        for (job, snapshot, params), place in zip(jobs, places, strict=True):
            self._insert(job, place)
            self.state.snapshots[job.job_id] = (snapshot, params or {})
        return None

    def _insert(self, job: NewJob, place: int) -> None:
        key = (job.user_id, job.job_type, job.idempotency_key)
        if job.idempotency_key and any(
            (r["userId"], r["jobType"], r["idempotencyKey"]) == key
            for r in self.state.jobs.values()
        ):
            raise DuplicateKeyError("a row with this key exists")
        row: Row = dict.fromkeys(RECORD_FIELDS)
        row.update(
            id=job.job_id,
            userId=job.user_id,
            jobType=job.job_type,
            lifecycleStatus=_Q,
            status=legacy_status_of(LifecycleStatus.QUEUED),
            queueName=job.queue_name,
            priority=job.priority,
            progress=0,
            attemptCount=0,
            waivedAttempts=0,
            fairSeq=place,
            maxAttempts=job.max_attempts,
            timeoutMs=job.timeout_ms,
            availableAt=self.now,
            queuedAt=self.now,
            createdAt=self.now,
            updatedAt=self.now,
            deadlineAt=job.deadline_at,
            costPolicy=job.cost_policy,
            targetType=job.target_type,
            targetId=job.target_id,
            idempotencyKey=job.idempotency_key,
            requestHash=job.request_hash,
            retriedFromJobId=job.retried_from_job_id,
            credentialMode=job.credential_mode,
            credentialId=job.credential_id,
            modelName=job.model_name,
            modelProvider=job.model_provider,
            tokenEstimate=job.token_estimate,
            traceParent=job.trace_parent,
            promptKey=job.prompt_key,
            promptVersion=job.prompt_version,
            outputSchemaVersion=job.output_schema_version,
            lastHeartbeatAt=None,
            triggerType=job.trigger_type,
            parentJobId=job.parent_job_id,
            rootJobId=job.root_job_id,
            treeDepth=job.tree_depth,
            maxParallel=job.max_parallel,
            joinPolicy=job.join_policy,
            reasoningEffort=job.reasoning_effort,
            prefixKey=job.prefix_key,
            prefixWarmedAt=None,
            modelTier="primary",
            modelPinned=job.model_pinned,
            childrenTotal=0,
            childrenOpen=0,
        )
        self.state.jobs[job.job_id] = row

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
        """As the SQL claim, routes and breakers aside (each job leases on its model; the
        claim's routing is tested on SQL, tests/db/test_model_routes.py): best first, then
        those of users over budget, of users at their cap of running jobs and of model keys
        without budget stay queued. Jobs not yet written (``fresh``) are granted none: they are
        claimed once inserted."""
        if fresh is not None:
            return [[] for _ in demands]
        wanted = max(0, sum(max(0, want) for _, want in demands))
        rows = sorted(
            (
                r
                for r in self.state.jobs.values()
                if r["lifecycleStatus"] == _Q
                and r["jobType"] in job_types
                and holds(Guard.AVAILABLE, r, {}, self.moment)
                and not (platform_key_only and r["credentialMode"] == USER_KEY_MODE)
                and not _waits(r, defer_ms, self.now)
            ),
            key=lambda r: (r["priority"], r["fairSeq"], r["createdAt"], r["id"]),
        )
        if budget is not None:
            users = {r["userId"] for r in rows}
            standings = await self._spend.budget_standings(users, budget, (_R,))
            within = set(
                admit_within_budgets(
                    [(r["id"], r["userId"], r["tokenEstimate"]) for r in rows], standings
                )
            )
            rows = [r for r in rows if r["id"] in within]
        if running_caps is not None and running_caps.active:
            running = Counter(
                r["userId"] for r in self.state.jobs.values() if r["lifecycleStatus"] == _R
            )
            kept = set(
                running_caps.admit([(r["id"], r["userId"]) for r in rows], running, len(rows))
            )
            rows = [r for r in rows if r["id"] in kept]
        ids = (
            [r["id"] for r in rows[:wanted]]
            if flow is None
            else self._keys.admit_claim(rows, flow, wanted)
        )
        return [
            await self._lease(holder, share)
            for (holder, _), share in zip(demands, deal(ids, [w for _, w in demands]), strict=True)
        ]

    async def _lease(self, holder: str, share: list[str]) -> list[LeaseGrant]:
        token = new_lease_token()
        for job_id in share:
            values = {"lockedBy": holder, "leaseTokenHash": digest(token)}
            self._set(LOCK, self.state.jobs[job_id], values)
        return [
            replace(await self._reads.grant_of(job_id, holder), lease_token=token)
            for job_id in share
        ]

"""An in-memory unit of work for the fast tests, in the style of cosmicpython's fake UoW.

:class:`FakeJobStore` provides the job store's primitives over dicts and interprets the same
lifecycle write table the SQL store compiles (``scheduler_service/lifecycle/transitions.py``):
each guard and each symbolic value has its meaning here in Python, on a clock the test moves. A
transaction works on a copy of the state that replaces it on commit, so a failed unit of work
leaves nothing behind, and hooks and wake-ups follow the commit exactly as on SQL.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError

from scheduler_service.billing.budgets import Budget
from scheduler_service.flow.keys import FlowPolicy
from scheduler_service.lifecycle.claims import deal
from scheduler_service.lifecycle.fairness import Floor, RunningCaps, places
from scheduler_service.lifecycle.lease_tokens import digest, new_lease_token
from scheduler_service.lifecycle.records import (
    RECORD_FIELDS,
    ArtifactRow,
    ExpiredLease,
    HeartbeatOutcome,
    JobFilter,
    JobRecord,
    LeaseGrant,
    LeasePayload,
    LockedRows,
    NewJob,
    StrandedJob,
    Usage,
    WatchState,
)
from scheduler_service.lifecycle.state_machine import LifecycleStatus, legacy_status_of
from scheduler_service.lifecycle.store import JobStore
from scheduler_service.lifecycle.transitions import (
    KEEP_ALIVE,
    LOCK,
    Guard,
    KeepOrNow,
    LifecycleWrite,
    Now,
    Param,
    Plus,
    explain_miss,
    renew_within_ms,
)
from scheduler_service.outbox.events import EventType, NewEvent
from scheduler_service.ports import Transaction, Wakeups
from scheduler_service.registry.definitions import USER_KEY_MODE

__all__ = ["FakeClock", "FakeState", "FakeUnitOfWork"]

T = TypeVar("T")
Row = dict[str, Any]
_Q, _R = LifecycleStatus.QUEUED.value, LifecycleStatus.RUNNING.value
_GUARD_PARAMS = {
    "attempt": Guard.ATTEMPT,
    "holder": Guard.HOLDER,
    "token": Guard.LEASE_TOKEN,
    "owner": Guard.OWNER,
}

#: The guards that compare ``lockUntil`` (or the start) with the clock.
_LEASE_TIME_GUARDS = frozenset({Guard.WITHIN_GRACE, Guard.OVERDUE, Guard.RENEWAL_DUE})


@dataclass
class FakeClock:
    """The "database clock" of the fake: it moves only when the test moves it."""

    now: datetime = field(default_factory=lambda: datetime(2026, 1, 1, tzinfo=UTC))

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class FakeEvent:
    event_type: EventType
    job_id: str
    job_type: str
    payload: dict[str, Any]


@dataclass
class FakeState:
    """Everything committed: the tables the services touch."""

    jobs: dict[str, Row] = field(default_factory=dict)
    snapshots: dict[str, tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict)
    events: list[FakeEvent] = field(default_factory=list)
    artifacts: dict[str, list[ArtifactRow]] = field(default_factory=dict)
    usage: list[tuple[str, int, Usage, str | None]] = field(default_factory=list)
    #: The gate rows' fair-dispatch places, by user.
    fair_lasts: dict[str, int] = field(default_factory=dict)

    def copy(self) -> FakeState:
        """A working copy: rows are copied, their values (never mutated in place) shared."""
        return FakeState(
            jobs={job_id: dict(row) for job_id, row in self.jobs.items()},
            snapshots=dict(self.snapshots),
            events=list(self.events),
            artifacts=dict(self.artifacts),
            usage=list(self.usage),
            fair_lasts=dict(self.fair_lasts),
        )


class FakeJobStore(JobStore):
    def __init__(self, state: FakeState, clock: FakeClock, *, ttl_ms: int, grace_ms: int) -> None:
        self.state = state
        self._clock = clock
        self._ttl_ms = ttl_ms
        self._grace_ms = grace_ms

    @property
    def _now(self) -> datetime:
        return self._clock.now

    def _ms(self, milliseconds: int) -> datetime:
        return self._now + timedelta(milliseconds=milliseconds)

    async def clock(self) -> datetime:
        return self._now

    # -- the write table, interpreted ---------------------------------------------------------

    def _holds(self, guard: Guard, row: Row, params: dict[str, Any]) -> bool:  # noqa: PLR0911
        if guard in _LEASE_TIME_GUARDS:
            return self._lease_time_holds(guard, row)
        match guard:
            case Guard.ATTEMPT:
                return bool(row["attemptCount"] == params["attempt"])
            case Guard.HOLDER:
                return bool(row["lockedBy"] == params["holder"])
            case Guard.LEASE_TOKEN:
                return bool(row["leaseTokenHash"] == params["token"])
            case Guard.OWNER:
                return bool(row["userId"] == params["owner"])
            case Guard.AVAILABLE:
                deadline = row["deadlineAt"]
                return bool(
                    row["availableAt"] <= self._now and (deadline is None or deadline > self._now)
                )
            case Guard.DEADLINE_PASSED:
                return row["deadlineAt"] is not None and row["deadlineAt"] <= self._now
            case Guard.ATTEMPTS_LEFT:
                return bool(row["attemptCount"] - row["waivedAttempts"] < row["maxAttempts"])
            case Guard.NO_CANCEL_REQUEST:
                return row["cancelRequestedAt"] is None
            case Guard.CANCEL_REQUESTED:
                return row["cancelRequestedAt"] is not None
            case Guard.NEVER_HEARTBEATED:
                return row["lastHeartbeatAt"] is None
        raise AssertionError(guard)

    def _lease_time_holds(self, guard: Guard, row: Row) -> bool:
        grace = timedelta(milliseconds=self._grace_ms)
        match guard:
            case Guard.WITHIN_GRACE:
                return bool(row["lockUntil"] >= self._now - grace)
            case Guard.OVERDUE:
                timeout = timedelta(milliseconds=row["timeoutMs"])
                return bool(
                    row["lockUntil"] < self._now - grace
                    or row["startedAt"] < self._now - (timeout + grace)
                )
            case Guard.RENEWAL_DUE:
                return bool(row["lockUntil"] < self._ms(renew_within_ms(self._ttl_ms)))
        raise AssertionError(guard)

    def _matches(
        self, write: LifecycleWrite, row: Row, active: set[Guard], params: dict[str, Any]
    ) -> bool:
        return any(
            row["lifecycleStatus"] == source.status.value
            and all(self._holds(g, row, params) for g in source.guards | (source.optional & active))
            for source in write.sources
        )

    def _set(self, write: LifecycleWrite, row: Row, params: dict[str, Any]) -> None:
        updates: Row = {}
        for column, value in write.all_values.items():
            match value:
                case Now(offset=None):
                    updates[column] = self._now
                case Now(offset="lease_ttl_ms"):
                    updates[column] = self._ms(self._ttl_ms)
                case Now(offset=str(name)):
                    updates[column] = self._ms(params[name])
                case Param(name=name, optional=optional):
                    if name in params:
                        updates[column] = params[name]
                    elif not optional:
                        raise KeyError(name)
                case Plus(amount=amount):
                    updates[column] = row[column] + amount
                case KeepOrNow():
                    updates[column] = row[column] or self._now
                case _:
                    updates[column] = value
        row.update(updates)

    async def apply(
        self, write: LifecycleWrite, job_id: str, *, overdue_only: bool = False, **params: Any
    ) -> bool:
        active = {
            _GUARD_PARAMS[k] for k, v in params.items() if k in _GUARD_PARAMS and v is not None
        }
        if overdue_only:
            active.add(Guard.OVERDUE)
        row = self.state.jobs.get(job_id)
        if row is not None and self._matches(write, row, active, params):
            self._set(write, row, params)
            return True
        miss = explain_miss(write, job_id, await self.get(job_id), params)
        if miss is None:
            return False
        raise miss

    # -- other primitives ---------------------------------------------------------------------

    async def lock_rows(self, job_ids: Collection[str]) -> LockedRows:
        jobs = {job_id: await self.get(job_id) for job_id in job_ids}
        return LockedRows(
            self._now,
            {job_id: job for job_id, job in jobs.items() if job is not None},
            self._ttl_ms,
            self._grace_ms,
        )

    async def keep_alive(self, holders: Collection[str]) -> int:
        kept = 0
        for row in self.state.jobs.values():
            if row["lockedBy"] in holders and self._matches(KEEP_ALIVE, row, set(), {}):
                self._set(KEEP_ALIVE, row, {})
                kept += 1
        return kept

    async def get(self, job_id: str) -> JobRecord | None:
        row = self.state.jobs.get(job_id)
        return None if row is None else JobRecord.from_mapping(row)

    async def create(
        self,
        job: NewJob,
        snapshot: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        key = (job.user_id, job.job_type, job.idempotency_key)
        if job.idempotency_key and any(
            (r["userId"], r["jobType"], r["idempotencyKey"]) == key
            for r in self.state.jobs.values()
        ):
            raise IntegrityError("INSERT AiAnalysisJob", {}, Exception("duplicate key"))
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
            fairSeq=self._fair_place(job.user_id, job.priority),
            maxAttempts=job.max_attempts,
            timeoutMs=job.timeout_ms,
            availableAt=self._now,
            queuedAt=self._now,
            createdAt=self._now,
            updatedAt=self._now,
            deadlineAt=job.deadline_at,
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
        )
        self.state.jobs[job.job_id] = row
        if snapshot is not None:
            self.state.snapshots[job.job_id] = (snapshot, params or {})

    def _fair_place(self, user: str, priority: int) -> int:
        at_priority = [r for r in self.state.jobs.values() if r["priority"] == priority]
        queued = [r["fairSeq"] for r in at_priority if r["lifecycleStatus"] == _Q]
        running = [r["fairSeq"] for r in at_priority if r["lifecycleStatus"] == _R]
        floor = Floor(min(queued, default=None), max(running, default=None))
        (place,), latest = places([(user, priority)], self.state.fair_lasts, {priority: floor})
        self.state.fair_lasts.update(latest)
        return place

    async def claim_batches(
        self,
        job_types: Sequence[str],
        demands: Sequence[tuple[str, int]],
        *,
        platform_key_only: bool = False,
        running_caps: RunningCaps | None = None,
        flow: FlowPolicy | None = None,  # model keys are a SQL concern: not modelled here
        budget: Budget | None = None,  # so are budgets
    ) -> list[list[LeaseGrant]]:
        wanted = sum(max(0, want) for _, want in demands)
        candidates = sorted(
            (
                r
                for r in self.state.jobs.values()
                if r["lifecycleStatus"] == _Q
                and r["jobType"] in job_types
                and self._holds(Guard.AVAILABLE, r, {})
                and not (platform_key_only and r["credentialMode"] == USER_KEY_MODE)
            ),
            key=lambda r: (r["priority"], r["fairSeq"], r["createdAt"], r["id"]),
        )
        if running_caps is not None and running_caps.active:
            running = Counter(
                r["userId"] for r in self.state.jobs.values() if r["lifecycleStatus"] == _R
            )
            pairs = [(r["id"], r["userId"]) for r in candidates]
            ids = running_caps.admit(pairs, running, max(0, wanted))
        else:
            ids = [r["id"] for r in candidates[: max(0, wanted)]]
        shares = deal(ids, [want for _, want in demands])
        granted: list[list[LeaseGrant]] = []
        for (holder, _), share in zip(demands, shares, strict=True):
            token = new_lease_token()
            for job_id in share:
                values = {"lockedBy": holder, "leaseTokenHash": digest(token)}
                self._set(LOCK, self.state.jobs[job_id], values)
            granted.append(
                [
                    replace(await self.grant_of(job_id, holder), lease_token=token)
                    for job_id in share
                ]
            )
        return granted

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
                )
            )
        return payloads

    async def lease_state(self, job_id: str) -> HeartbeatOutcome:
        row = self.state.jobs[job_id]
        return HeartbeatOutcome(row["lockUntil"], row["cancelRequestedAt"] is not None)

    async def available_at(self, job_id: str) -> datetime:
        available: datetime = self.state.jobs[job_id]["availableAt"]
        return available

    async def id_by_key(self, user_id: str, job_type: str, key: str) -> str | None:
        for row in self.state.jobs.values():
            if (row["userId"], row["jobType"], row["idempotencyKey"]) == (user_id, job_type, key):
                return str(row["id"])
        return None

    async def lock_user_gate(self, user_id: str) -> tuple[int, int]:
        mine = [r for r in self.state.jobs.values() if r["userId"] == user_id]
        today = self._now.replace(hour=0, minute=0, second=0, microsecond=0)
        active = sum(r["lifecycleStatus"] in (_Q, _R) for r in mine)
        return active, sum(r["createdAt"] >= today for r in mine)

    async def watch_states(self, job_ids: Sequence[str]) -> dict[str, WatchState]:
        return {
            job_id: JobRecord.from_mapping(self.state.jobs[job_id]).watch_state()
            for job_id in job_ids
            if job_id in self.state.jobs
        }

    async def prune_user_gates(self, idle_ms: int, *, limit: int = 500) -> int:
        return 0  # the fake counts without gate rows

    async def artifacts(self, job_id: str) -> list[ArtifactRow]:
        return list(self.state.artifacts.get(job_id, []))

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

    async def expired_leases(self, *, limit: int = 100) -> list[ExpiredLease]:
        rows = [
            r
            for r in self.state.jobs.values()
            if r["lifecycleStatus"] == _R and self._holds(Guard.OVERDUE, r, {})
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
            if r["lifecycleStatus"] == _Q and self._holds(Guard.DEADLINE_PASSED, r, {})
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

    async def project(
        self, projector: str, job: JobRecord, attempt_no: int, output: BaseModel
    ) -> None:
        self.state.artifacts[job.id] = [ArtifactRow(projector, f"{job.id}:{attempt_no}")]

    async def record_usage(
        self, job: JobRecord, attempt_no: int, usage: Usage | None, error_code: str | None = None
    ) -> None:
        if usage is not None:
            self.state.usage.append((job.id, attempt_no, usage, error_code))


class FakeTransaction(Transaction):
    def __init__(self, store: FakeJobStore, wakeups: Wakeups, *, writable: bool = True) -> None:
        super().__init__(store, wakeups, writable=writable)
        self._store = store

    async def _write_events(self, events: Sequence[NewEvent]) -> None:
        self._store.state.events += [
            FakeEvent(e.event_type, e.job_id, e.job_type, e.payload) for e in events
        ]


class FakeUnitOfWork:
    """Commits by swapping in the transaction's copy of the state; ``commits`` counts them."""

    def __init__(
        self, *, wakeups: Wakeups | None = None, ttl_ms: int = 60_000, grace_ms: int = 30_000
    ) -> None:
        self.state = FakeState()
        self.clock = FakeClock()
        self._wakeups = wakeups or Wakeups()
        self._ttl_ms = ttl_ms
        self._grace_ms = grace_ms
        self.commits = 0

    @property
    def wakeups(self) -> Wakeups:
        return self._wakeups

    def _store(self, state: FakeState) -> FakeJobStore:
        return FakeJobStore(state, self.clock, ttl_ms=self._ttl_ms, grace_ms=self._grace_ms)

    async def run(self, work: Callable[[Transaction], Awaitable[T]]) -> T:
        working = self.state.copy()
        tx = FakeTransaction(self._store(working), self._wakeups)
        try:
            result = await work(tx)
        except BaseException:
            await tx.run_hooks(committed=False)
            raise
        self.state = working
        self.commits += 1
        await tx.run_hooks(committed=True)
        return result

    async def read(self, query: Callable[[Transaction], Awaitable[T]]) -> T:
        tx = FakeTransaction(self._store(self.state.copy()), self._wakeups, writable=False)
        return await query(tx)

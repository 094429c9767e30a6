"""The job store on SQL: the only code that writes ``lifecycleStatus``.

Every lifecycle write is one guarded UPDATE compiled from the write table
(:mod:`~scheduler_service.lifecycle.transitions`) whose matched-row count is checked; there is no
read-then-write. When it matches nothing, the row is read afterwards only to choose the typed
error that explains why. The store is bound to one transaction's connection, so a projection, the
state change and its outbox event commit together.

``tests/test_lifecycle_single_writer.py`` fails the build if any module outside
``scheduler_service/lifecycle/`` writes ``lifecycleStatus``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from pydantic import BaseModel
from sqlalchemy import Table, bindparam, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.billing import sql as billing_sql
from scheduler_service.billing.budgets import Budget, Standing
from scheduler_service.db.clock import db_now
from scheduler_service.db.idempotent import insert_ignoring_duplicates
from scheduler_service.db.models import AiJobSnapshot, AiUserJobGate
from scheduler_service.db.multirow import batch_bucket, insert_rows
from scheduler_service.flow import sql as flow_sql
from scheduler_service.flow.keys import (
    Answered,
    FlowPolicy,
    KeyState,
    ModelKey,
    after_answers,
    after_congestion,
    paused,
    slowed,
)
from scheduler_service.ids import new_id
from scheduler_service.lifecycle import claims, fairness, queries, sql
from scheduler_service.lifecycle.fairness import RunningCaps
from scheduler_service.lifecycle.records import (
    ArtifactRow,
    Beat,
    ExpiredLease,
    HeartbeatOutcome,
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
from scheduler_service.lifecycle.store import JobStore
from scheduler_service.lifecycle.transitions import (
    HEARTBEAT,
    SUCCEED,
    Guard,
    LifecycleWrite,
    explain_miss,
    renew_within_ms,
)
from scheduler_service.projection.projectors import JobContext, project, project_many
from scheduler_service.usage import record_usage, record_usages

__all__ = ["LeaseTimes", "SqlJobStore"]

_snapshots = cast(Table, AiJobSnapshot.__table__)
_gate = cast(Table, AiUserJobGate.__table__)
_INSERT_SNAPSHOT = insert(_snapshots).values(createdAt=db_now())
_LOCK_GATE = select(_gate.c.userId).where(_gate.c.userId == bindparam("b_user")).with_for_update()
#: Several users' gates, locked in one order so that two batches cannot deadlock.
_LOCK_GATES = (
    select(_gate.c.userId)
    .where(_gate.c.userId.in_(bindparam("b_users", expanding=True)))
    .order_by(_gate.c.userId)
    .with_for_update()
)

#: Fair dispatch: the users' last places, the queue's head and the newest running place.
_GATE_PLACES = select(_gate.c.userId, _gate.c.fairSeq).where(
    _gate.c.userId.in_(bindparam("b_users", expanding=True))
)
_QUEUE_FLOOR = select(
    select(func.min(sql.jobs.c.fairSeq))
    .where(
        sql.jobs.c.lifecycleStatus == LifecycleStatus.QUEUED.value,
        sql.jobs.c.priority == bindparam("b_priority"),
    )
    .scalar_subquery(),
    select(func.max(sql.jobs.c.fairSeq))
    .where(
        sql.jobs.c.lifecycleStatus == LifecycleStatus.RUNNING.value,
        sql.jobs.c.priority == bindparam("b_priority"),
    )
    .scalar_subquery(),
)
#: The same for one user at one priority (a single create), with the user's gate, in one read.
_ONE_USER_FLOOR = select(
    *_QUEUE_FLOOR.selected_columns,
    select(_gate.c.fairSeq).where(_gate.c.userId == bindparam("b_user")).scalar_subquery(),
    select(func.count()).where(_gate.c.userId == bindparam("b_user")).scalar_subquery(),
)
_SET_GATE_PLACE = (
    update(_gate).where(_gate.c.userId == bindparam("b_user")).values(fairSeq=bindparam("v_place"))
)

#: Users' last places, the users with a gate row, and each priority's floor.
_Floors = tuple[dict[str, int], set[str], dict[int, fairness.Floor]]

_HELD_BY = frozenset({Guard.ATTEMPT, Guard.HOLDER})
_RESULT_VALUES = frozenset({"outputHash", "resultIdempotencyKey", "validatedOutput"})
_BEAT_PROGRESS = frozenset({"progress"})

#: Parameters that switch on an optional guard when the caller passes them.
_GUARD_PARAMS = {
    "attempt": Guard.ATTEMPT,
    "holder": Guard.HOLDER,
    "token": Guard.LEASE_TOKEN,
    "owner": Guard.OWNER,
}


@dataclass(frozen=True, slots=True)
class LeaseTimes:
    """The lease length a lock or heartbeat grants, and the reaper's grace past it."""

    ttl_ms: int = 60_000
    grace_ms: int = 30_000


class SqlJobStore(JobStore):
    def __init__(self, conn: AsyncConnection, lease: LeaseTimes) -> None:
        self._conn = conn
        #: Payload rows read with this transaction's claims, for lease_payloads to use.
        self._payload_rows: dict[str, Any] = {}
        self._lease = lease

    async def apply(
        self, write: LifecycleWrite, job_id: str, *, overdue_only: bool = False, **params: Any
    ) -> bool:
        guards = {
            _GUARD_PARAMS[k] for k, v in params.items() if k in _GUARD_PARAMS and v is not None
        }
        if overdue_only:
            guards.add(Guard.OVERDUE)
        values = {k for k in params if k not in _GUARD_PARAMS and not k.endswith("_ms")}
        statement = sql.write_statement(write, frozenset(guards), frozenset(values))
        bound: dict[str, Any] = {
            "b_id": job_id,
            "b_lease_ttl_ms": self._lease.ttl_ms,
            "b_grace_ms": self._lease.grace_ms,
        }
        for name, value in params.items():
            # Guards and clock offsets bind as ``b_<name>``, the values they set as ``v_<name>``.
            if name in values:
                bound[f"v_{name}"] = value
            elif value is not None:
                bound[f"b_{name}"] = value
        # MySQL dialects connect with CLIENT_FOUND_ROWS, so this counts matched rows, not changed
        # ones: a write that leaves a row as it was still reports 1 (reliability S16).
        if (await self._conn.execute(statement, bound)).rowcount == 1:
            return True
        miss = explain_miss(write, job_id, await self.get(job_id), params)
        if miss is None:
            return False
        raise miss

    async def lock_rows(self, job_ids: Collection[str]) -> LockedRows:
        found = (await self._conn.execute(sql.SELECT_LOCKED, {"b_ids": sorted(job_ids)})).all()
        now = found[0].dbNow if found else (await self._conn.execute(sql.SELECT_NOW)).scalar_one()
        return LockedRows(
            now,
            {row.id: JobRecord.from_mapping(dict(row._mapping)) for row in found},
            self._lease.ttl_ms,
            self._lease.grace_ms,
        )

    async def keep_alive(self, holders: Collection[str]) -> int:
        bound = {
            "b_holders": sorted(holders),
            "b_lease_ttl_ms": self._lease.ttl_ms,
            "b_grace_ms": self._lease.grace_ms,
            "b_renew_ms": renew_within_ms(self._lease.ttl_ms),
        }
        return int((await self._conn.execute(sql.keep_alive_statement(), bound)).rowcount)

    async def succeed_many(self, items: Sequence[Success]) -> None:
        rows = [
            {
                "i": item.job_id,
                "b_attempt": item.attempt_no,
                "b_holder": item.holder,
                "v_outputHash": item.output_hash,
                "v_resultIdempotencyKey": item.key,
                "v_validatedOutput": item.output,
            }
            for item in items
        ]
        await self._write_many(SUCCEED, _HELD_BY, _RESULT_VALUES, rows, {})

    async def extend_leases(
        self, items: Sequence[Beat], judged_at: datetime
    ) -> dict[str, HeartbeatOutcome]:
        if not items:
            return {}
        shared: dict[str, Any] = {
            "b_lease_ttl_ms": self._lease.ttl_ms,
            "b_grace_floor": judged_at - timedelta(milliseconds=self._lease.grace_ms),
        }
        rows = [
            {
                "i": item.job_id,
                "b_attempt": item.attempt_no,
                "b_holder": item.holder,
                "v_progress": item.progress,
            }
            for item in items
        ]
        await self._write_many(HEARTBEAT, _HELD_BY, _BEAT_PROGRESS, rows, shared)
        found = await self._conn.execute(
            sql.SELECT_LEASE_STATES, {"b_ids": [item.job_id for item in items]}
        )
        return {
            row.id: HeartbeatOutcome(row.lockUntil, row.cancelRequestedAt is not None)
            for row in found
        }

    async def _write_many(
        self,
        write: LifecycleWrite,
        active: frozenset[Guard],
        present: frozenset[str],
        rows: Sequence[dict[str, Any]],
        shared: dict[str, Any],
    ) -> None:
        if not rows:
            return
        # Padded to its bucket by repeating the last row: a repeated id matches its row once and
        # its CASE branch is never reached.
        size = batch_bucket(len(rows))
        params = dict(shared)
        for k in range(size):
            for name, value in rows[min(k, len(rows) - 1)].items():
                params[f"{name}{k}"] = value
        statement = sql.write_many_statement(write, size, active, present)
        matched = (await self._conn.execute(statement, params)).rowcount
        if matched != len(rows):
            # Judged on rows locked by this transaction: nothing could have changed them.
            raise RuntimeError(f"{write.name} of {len(rows)} locked jobs matched {matched}")

    async def project_many(self, items: Sequence[tuple[str, JobRecord, int, BaseModel]]) -> None:
        await project_many(
            self._conn,
            [
                (
                    projector,
                    JobContext(job.id, job.userId, attempt, job.targetType, job.targetId),
                    out,
                )
                for projector, job, attempt, out in items
            ],
        )

    async def record_usage_many(
        self, entries: Sequence[tuple[JobRecord, int, Usage | None, str | None]]
    ) -> None:
        await record_usages(self._conn, entries)

    async def get(self, job_id: str) -> JobRecord | None:
        return await queries.read_job(self._conn, job_id)

    async def create(
        self,
        job: NewJob,
        snapshot: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        (place,) = await self._fair_places([job])
        await self._conn.execute(sql.INSERT_QUEUED, _insert_values(job, place))
        if snapshot is not None:
            await self._conn.execute(
                _INSERT_SNAPSHOT,
                {
                    "id": new_id(),
                    "jobId": job.job_id,
                    "schemaVersion": job.input_schema_version,
                    "content": snapshot,
                    "params": params or {},
                },
            )

    async def create_many(
        self, jobs: Sequence[tuple[NewJob, dict[str, Any], dict[str, Any]]]
    ) -> None:
        placed = await self._fair_places([job for job, _, _ in jobs])
        await insert_rows(
            self._conn,
            sql.jobs,
            [_insert_values(job, place) for (job, _, _), place in zip(jobs, placed, strict=True)],
            stamped=sql.QUEUED_STAMPED,
            fixed=sql.QUEUED_FIXED,
        )
        snapshots = [
            {
                "id": new_id(),
                "jobId": job.job_id,
                "schemaVersion": job.input_schema_version,
                "content": snapshot,
                "params": params or {},
            }
            for job, snapshot, params in jobs
        ]
        await insert_rows(self._conn, _snapshots, snapshots)

    async def watch_states(self, job_ids: Sequence[str]) -> dict[str, WatchState]:
        return await queries.watch_states(self._conn, job_ids)

    async def _one_user_floor(self, user: str, priority: int) -> _Floors:
        row = (
            await self._conn.execute(_ONE_USER_FLOOR, {"b_priority": priority, "b_user": user})
        ).one()
        head, running, last, gates = row[0], row[1], row[2], row[3]
        lasts = {} if last is None else {user: int(last)}
        return lasts, {user} if gates else set(), {priority: fairness.Floor(head, running)}

    async def _floors(self, users: list[str], priorities: list[int]) -> _Floors:
        rows = (await self._conn.execute(_GATE_PLACES, {"b_users": users})).all()
        lasts = {row.userId: int(row.fairSeq) for row in rows if row.fairSeq is not None}
        floors = {}
        for priority in priorities:
            head, running = (await self._conn.execute(_QUEUE_FLOOR, {"b_priority": priority})).one()
            floors[priority] = fairness.Floor(head, running)
        return lasts, {row.userId for row in rows}, floors

    async def _fair_places(self, jobs: Sequence[NewJob]) -> list[int]:
        """Each new job's place in its user's turn (:mod:`~scheduler_service.lifecycle.fairness`),
        moving the users' gates on to their newest place."""
        users = sorted({job.user_id for job in jobs})
        priorities = sorted({job.priority for job in jobs})
        lasts, gated, floors = await (
            self._one_user_floor(users[0], priorities[0])
            if len(users) == len(priorities) == 1
            else self._floors(users, priorities)
        )
        placed, latest = fairness.places([(j.user_id, j.priority) for j in jobs], lasts, floors)
        moved = [{"b_user": u, "v_place": p} for u, p in latest.items() if u in gated]
        if moved:
            await self._conn.execute(_SET_GATE_PLACE, moved)
        # Creates that skip the limits have no gate row yet: one is made to hold the place.
        new_gates = [{"userId": u, "fairSeq": p} for u, p in latest.items() if u not in gated]
        if new_gates:
            await insert_ignoring_duplicates(self._conn, _gate, new_gates, stamped=("updatedAt",))
        return placed

    async def get_many(self, job_ids: Sequence[str]) -> dict[str, JobRecord]:
        return await queries.read_jobs(self._conn, job_ids)

    async def ids_by_keys(
        self, keys: Collection[tuple[str, str, str]]
    ) -> dict[tuple[str, str, str], str]:
        return await queries.job_ids_by_keys(self._conn, keys)

    async def lock_user_gates(self, user_ids: Collection[str]) -> dict[str, tuple[int, int]]:
        users = sorted(set(user_ids))
        while True:
            rows = [{"userId": user} for user in users]
            await insert_ignoring_duplicates(self._conn, _gate, rows, stamped=("updatedAt",))
            locked = await self._conn.execute(_LOCK_GATES, {"b_users": users})
            if len(locked.all()) == len(users):  # none pruned between the insert and the lock
                return await queries.active_and_today_of(self._conn, users)

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
        return await claims.claim_batches(
            self._conn,
            job_types,
            demands,
            lease_ttl_ms=self._lease.ttl_ms,
            platform_key_only=platform_key_only,
            payload_rows=self._payload_rows,
            running_caps=running_caps,
            flow=flow,
            budget=budget,
        )

    async def model_congested(
        self, job: JobRecord, flow: FlowPolicy, retry_after_ms: int | None
    ) -> None:
        key = flow.key(job.modelProvider, job.modelName, job.credentialMode)
        now, state = await flow_sql.congested(self._conn, key, flow)
        running = await flow_sql.running_by_key(self._conn, flow.user_key_mode, {key})
        pause = None if retry_after_ms is None else timedelta(milliseconds=retry_after_ms)
        state = after_congestion(state, now, pause, running.get(key, 0))
        await flow_sql.save_states(
            self._conn, {key: state}, {key: 1} if retry_after_ms is not None else None
        )

    async def model_paused(self, job: JobRecord, flow: FlowPolicy, pause_ms: int) -> None:
        key = flow.key(job.modelProvider, job.modelName, job.credentialMode)
        now, state = await flow_sql.congested(self._conn, key, flow)
        await flow_sql.save_states(
            self._conn, {key: paused(state, now, timedelta(milliseconds=pause_ms))}
        )

    async def model_answered(
        self, answers: Sequence[tuple[JobRecord, Usage | None]], flow: FlowPolicy
    ) -> None:
        """Calls that answered: their keys' windows grow, or shrink when a first token came
        slower than the key's baseline allows (flow/keys.py ``after_answers``)."""
        calls: dict[ModelKey, list[Answered]] = {}
        for job, usage in answers:
            key = flow.key(job.modelProvider, job.modelName, job.credentialMode)
            first_token = usage.first_token_ms if usage is not None else None
            calls.setdefault(key, []).append(Answered(job.lockedAt, first_token))
        if any(c.first_token_ms is not None for batch in calls.values() for c in batch):
            now, states = await flow_sql.lock_keys(self._conn, flow.defaults, calls)
        else:
            # Nothing to judge: only windows still growing change (no lock on a settled key).
            now, states = await flow_sql.congested_keys(self._conn, flow.defaults, calls)
        changed: dict[ModelKey, KeyState] = {}
        for key, state in states.items():
            assert now is not None  # read with the states
            running = await self._running_before_decrease(key, state, calls[key], now, flow)
            after = after_answers(
                state, calls[key], now, tolerance=flow.latency_tolerance, running=running
            )
            if after != state:
                changed[key] = after
        if changed:
            await flow_sql.save_states(self._conn, changed)

    async def _running_before_decrease(
        self,
        key: ModelKey,
        state: KeyState,
        calls: Sequence[Answered],
        now: datetime,
        flow: FlowPolicy,
    ) -> int:
        """What runs on a key about to be halved with neither a window nor a limit to halve."""
        if state.effective is not None or state.limits.max_concurrency:
            return 0
        if not slowed(state, calls, now, flow.latency_tolerance):
            return 0
        running = await flow_sql.running_by_key(self._conn, flow.user_key_mode, {key})
        return running.get(key, 0)

    async def clock(self) -> datetime:
        return (await self._conn.execute(select(db_now()))).scalar_one()

    async def over_budget(self, user_ids: Collection[str], budget: Budget) -> set[str]:
        return await billing_sql.over_budget(self._conn, user_ids, budget)

    async def budget_standings(
        self, user_ids: Collection[str], budget: Budget, reserving: Collection[str]
    ) -> dict[str, Standing]:
        return await billing_sql.budget_standings(self._conn, user_ids, budget, reserving)

    async def over_budget_queued(
        self, budget: Budget, *, limit: int = 100
    ) -> list[tuple[str, str]]:
        return await billing_sql.over_budget_queued(self._conn, budget, limit=limit)

    async def grant_of(self, job_id: str, holder: str) -> LeaseGrant:
        row = (
            await self._conn.execute(sql.SELECT_GRANT, {"b_id": job_id, "b_holder": holder})
        ).one()
        return claims.grant_of(row, "")

    async def lease_payloads(self, grants: Sequence[LeaseGrant]) -> list[LeasePayload]:
        if all(g.job_id in self._payload_rows for g in grants):
            return [queries.payload_of(g, self._payload_rows.pop(g.job_id)) for g in grants]
        return await queries.lease_payloads(self._conn, grants)

    async def lease_state(self, job_id: str) -> HeartbeatOutcome:
        row = (await self._conn.execute(sql.SELECT_LEASE_STATE, {"b_id": job_id})).one()
        return HeartbeatOutcome(row.lockUntil, row.cancelRequestedAt is not None)

    async def available_at(self, job_id: str) -> datetime:
        row = (await self._conn.execute(sql.SELECT_AVAILABLE_AT, {"b_id": job_id})).one()
        return row.availableAt  # type: ignore[no-any-return]

    async def id_by_key(self, user_id: str, job_type: str, key: str) -> str | None:
        return await queries.job_id_by_key(self._conn, user_id, job_type, key)

    async def lock_user_gate(self, user_id: str) -> tuple[int, int]:
        # Creates of one user serialise on their gate row, so concurrent creates cannot all pass
        # the count together.
        while True:
            await insert_ignoring_duplicates(
                self._conn, _gate, [{"userId": user_id}], stamped=("updatedAt",)
            )
            # Pruned between the insert and the lock: put it back, or nothing serialises.
            if (await self._conn.execute(_LOCK_GATE, {"b_user": user_id})).first() is not None:
                return await queries.active_and_today(self._conn, user_id)

    async def prune_user_gates(self, idle_ms: int, *, limit: int = 500) -> int:
        old = _gate.c.updatedAt < db_now(-bindparam("b_idle_ms"))
        found = await self._conn.execute(
            select(_gate.c.userId).where(old).limit(limit), {"b_idle_ms": idle_ms}
        )
        users = list(found.scalars())
        if not users:
            return 0
        result = await self._conn.execute(
            delete(_gate).where(_gate.c.userId.in_(users), old), {"b_idle_ms": idle_ms}
        )
        return int(result.rowcount)

    async def artifacts(self, job_id: str) -> list[ArtifactRow]:
        return await queries.artifacts_of(self._conn, job_id)

    async def snapshot(self, job_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        return await queries.snapshot_of(self._conn, job_id)

    async def page(
        self, filters: JobFilter, *, limit: int, before: tuple[datetime, str] | None = None
    ) -> list[JobRecord]:
        return await queries.page(
            self._conn, queries.filter_clauses(filters), limit=limit, before=before
        )

    async def awaiting_cancel(self, user_id: str, *, limit: int) -> list[JobRecord]:
        return await queries.page(self._conn, queries.awaiting_cancel_clauses(user_id), limit=limit)

    async def expired_leases(self, *, limit: int = 100) -> list[ExpiredLease]:
        return await queries.expired_leases(self._conn, self._lease.grace_ms, limit=limit)

    async def stranded_jobs(
        self, registered: Collection[str], *, limit: int = 100
    ) -> list[StrandedJob]:
        return await queries.stranded_jobs(self._conn, registered, limit=limit)

    async def expired_deadlines(self, *, limit: int = 100) -> list[str]:
        return await queries.expired_deadlines(self._conn, limit=limit)

    async def cancel_requested_held_by(
        self, holders: Collection[str]
    ) -> list[tuple[str, int, str]]:
        return await queries.cancel_requested_held_by(self._conn, holders)

    async def project(
        self, projector: str, job: JobRecord, attempt_no: int, output: BaseModel
    ) -> None:
        context = JobContext(job.id, job.userId, attempt_no, job.targetType, job.targetId)
        await project(self._conn, projector, context, output)

    async def record_usage(
        self, job: JobRecord, attempt_no: int, usage: Usage | None, error_code: str | None = None
    ) -> None:
        await record_usage(self._conn, job, attempt_no, usage, error_code)


def _insert_values(job: NewJob, fair_seq: int) -> dict[str, Any]:
    return {
        "id": job.job_id,
        "fairSeq": fair_seq,
        "userId": job.user_id,
        "jobType": job.job_type,
        "triggerType": job.trigger_type,
        "queueName": job.queue_name,
        "targetType": job.target_type,
        "targetId": job.target_id,
        "parentJobId": job.parent_job_id,
        "idempotencyKey": job.idempotency_key,
        "requestHash": job.request_hash,
        "retriedFromJobId": job.retried_from_job_id,
        "priority": job.priority,
        "maxAttempts": job.max_attempts,
        "timeoutMs": job.timeout_ms,
        "credentialMode": job.credential_mode,
        "credentialId": job.credential_id,
        "modelName": job.model_name,
        "modelProvider": job.model_provider,
        "tokenEstimate": job.token_estimate,
        "maxOutputTokens": job.max_output_tokens,
        "traceParent": job.trace_parent,
        "promptKey": job.prompt_key,
        "promptVersion": job.prompt_version,
        "inputSchemaVersion": job.input_schema_version,
        "outputSchemaVersion": job.output_schema_version,
        "snapshotId": job.snapshot_id,
        "deadlineAt": job.deadline_at,
    }

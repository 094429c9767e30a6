"""The jobs on SQL: the only code that writes ``lifecycleStatus``.

Every lifecycle write is one guarded UPDATE compiled from the write table
(:mod:`~scheduler_service.core.transitions`) whose matched-row count is checked; there is no
read-then-write. When it matches nothing, the row is read afterwards only to choose the typed
error that explains why. The stores are bound to one transaction's connection, so a projection,
the state change and its outbox event commit together.

``tests/test_lifecycle_single_writer.py`` fails the build if any module but this one and the
claim (``sql/claims.py``) writes ``lifecycleStatus``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Table, select
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.core.budgets import Budget
from scheduler_service.core.fairness import RunningCaps
from scheduler_service.core.guards import GUARD_PARAMS
from scheduler_service.core.ids import new_id
from scheduler_service.core.lease_tokens import digest
from scheduler_service.core.model_keys import FlowPolicy
from scheduler_service.core.records import (
    RECORD_FIELDS,
    Beat,
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
    Success,
    WatchState,
)
from scheduler_service.core.routes import Router
from scheduler_service.core.transitions import (
    HEARTBEAT,
    SUCCEED,
    Guard,
    LifecycleWrite,
    explain_miss,
    renew_within_ms,
)
from scheduler_service.ports import JobReads, JobStore, JobSweeps, NewJobRows
from scheduler_service.sql import claims
from scheduler_service.sql import job_queries as queries
from scheduler_service.sql import job_statements as sql
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.driver import write_later
from scheduler_service.sql.db.models import AiJobSnapshot
from scheduler_service.sql.db.multirow import batch_bucket, insert_rows, insert_rows_returning

__all__ = ["LeaseTimes", "SqlJobReads", "SqlJobStore", "SqlJobSweeps"]

_snapshots = cast(Table, AiJobSnapshot.__table__)
#: MariaDB's one-statement setting: the snapshots' foreign key to their jobs, which this same
#: transaction inserts next, is not checked row by row.
_NO_KEY_CHECK = "SET STATEMENT foreign_key_checks=0 FOR "
#: The job columns that hold times: the database stores them at its own precision.
_TIMES = frozenset(c.name for c in sql.jobs.c if c.type.python_type is datetime)

_HELD_BY = frozenset({Guard.ATTEMPT, Guard.HOLDER})
_RESULT_VALUES = frozenset({"outputHash", "resultIdempotencyKey", "validatedOutput"})
_BEAT_PROGRESS = frozenset({"progress"})


@dataclass(frozen=True, slots=True)
class LeaseTimes:
    """The lease length a lock or heartbeat grants, and the reaper's grace past it."""

    ttl_ms: int = 60_000
    grace_ms: int = 30_000


class SqlJobStore(JobStore):
    def __init__(self, conn: AsyncConnection, lease: LeaseTimes, reads: SqlJobReads) -> None:
        super().__init__(reads)
        self._conn = conn
        self._lease = lease
        self._sql_reads = reads

    async def apply(
        self, write: LifecycleWrite, job_id: str, *, overdue_only: bool = False, **params: Any
    ) -> bool:
        guards = {GUARD_PARAMS[k] for k, v in params.items() if k in GUARD_PARAMS and v is not None}
        if overdue_only:
            guards.add(Guard.OVERDUE)
        values = {k for k in params if k not in GUARD_PARAMS and not k.endswith("_ms")}
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
        miss = explain_miss(write, job_id, await self._reads.get(job_id), params)
        if miss is None:
            return False
        raise miss

    async def create_many(
        self,
        jobs: NewJobRows,
        places: Sequence[int],
        *,
        leased: Mapping[str, Placement] | None = None,
    ) -> dict[str, JobRecord] | None:
        leased = leased or {}
        queued, running = [], []
        for (job, _, _), place in zip(jobs, places, strict=True):
            values = _insert_values(job, place)
            placement = leased.get(job.job_id)
            if placement is None:
                queued.append(values)
                continue
            values["lockedBy"] = placement.holder
            values["leaseTokenHash"] = digest(placement.lease_token)
            values["lockUntil"] = placement.lock_until
            running.append(values)
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
        # On MariaDB the snapshots go first, their key to the job checked by nothing but this
        # transaction (the job's insert follows; a failure rolls both back): a deferred foreign
        # key, so that between a job's insert (its availableAt) and the commit nothing stands.
        snapshots_first = getattr(self._conn.dialect, "is_mariadb", False)
        if snapshots_first:
            await insert_rows(self._conn, _snapshots, snapshots, prefix=_NO_KEY_CHECK)
        written: list[dict[str, Any]] | None = []
        for rows, stamped, fixed in (
            (queued, sql.QUEUED_STAMPED, sql.queued_fixed()),
            (running, sql.LEASED_STAMPED, sql.leased_fixed()),
        ):
            if not rows:
                continue
            # Read back only what the database decides (its clock, the defaults, what it
            # rounds): the rest of a record is what was written.
            given = {*rows[0], *fixed}
            asked = [c for c in RECORD_FIELDS if c not in given or c in _TIMES]
            found = await insert_rows_returning(
                self._conn, sql.jobs, rows, ["id", *asked], stamped=stamped, fixed=fixed
            )
            if found is None or written is None:
                written = None
                continue
            by_id = {row["id"]: row for row in rows}
            written += [{**by_id[row["id"]], **fixed, **row} for row in found]
        if not snapshots_first:
            await insert_rows(self._conn, _snapshots, snapshots)
        if written is None:
            return None
        return {row["id"]: JobRecord.from_mapping(row) for row in written}

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
        return await claims.claim_batches(
            self._conn,
            job_types,
            demands,
            lease_ttl_ms=self._lease.ttl_ms,
            platform_key_only=platform_key_only,
            payload_rows=self._sql_reads.payload_rows,
            running_caps=running_caps,
            flow=flow,
            budget=budget,
            defer_ms=defer_ms,
            fresh=fresh,
            router=router,
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
        await write_many(self._conn, SUCCEED, _HELD_BY, _RESULT_VALUES, rows)

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
        await write_many(self._conn, HEARTBEAT, _HELD_BY, _BEAT_PROGRESS, rows, shared=shared)
        found = await self._conn.execute(
            sql.SELECT_LEASE_STATES, {"b_ids": [item.job_id for item in items]}
        )
        return {
            row.id: HeartbeatOutcome(row.lockUntil, row.cancelRequestedAt is not None)
            for row in found
        }


async def write_many(
    conn: AsyncConnection,
    write: LifecycleWrite,
    active: frozenset[Guard],
    present: frozenset[str],
    rows: Sequence[dict[str, Any]],
    *,
    shared: dict[str, Any] | None = None,
) -> None:
    """``write`` on several jobs this transaction locked, in one statement (each row its own
    guard and set values); its count is checked with the transaction's next statement."""
    if not rows:
        return
    # Padded to its bucket by repeating the last row: a repeated id matches its row once and
    # its CASE branch is never reached.
    size = batch_bucket(len(rows))
    params = dict(shared or {})
    for k in range(size):
        for name, value in rows[min(k, len(rows) - 1)].items():
            params[f"{name}{k}"] = value
    statement = sql.write_many_statement(write, size, active, present)
    await write_later(
        conn, statement, params, expect=len(rows), what=f"{write.name} of locked jobs"
    )


class SqlJobReads(JobReads):
    def __init__(self, conn: AsyncConnection, lease: LeaseTimes) -> None:
        self._conn = conn
        self._lease = lease
        #: Payload rows read with this transaction's claims, for lease_payloads to use.
        self.payload_rows: dict[str, Any] = {}

    async def get(self, job_id: str) -> JobRecord | None:
        return await queries.read_job(self._conn, job_id)

    async def get_many(self, job_ids: Sequence[str]) -> dict[str, JobRecord]:
        return await queries.read_jobs(self._conn, job_ids)

    async def ids_by_keys(
        self, keys: Collection[tuple[str, str, str]]
    ) -> dict[tuple[str, str, str], str]:
        return await queries.job_ids_by_keys(self._conn, keys)

    async def lock_rows(self, job_ids: Collection[str]) -> LockedRows:
        result = await self._conn.execute(sql.SELECT_LOCKED, {"b_ids": sorted(job_ids)})
        found = result.all()
        now = found[0].dbNow if found else (await self._conn.execute(sql.SELECT_NOW)).scalar_one()
        return LockedRows(
            now,
            {job.id: job for job in JobRecord.from_rows(list(result.keys()), found)},
            self._lease.ttl_ms,
            self._lease.grace_ms,
        )

    async def watch_states(self, job_ids: Sequence[str]) -> dict[str, WatchState]:
        return await queries.watch_states(self._conn, job_ids)

    async def clock(self) -> datetime:
        return (await self._conn.execute(select(db_now()))).scalar_one()

    async def left_to_legacy(self, job_id: str) -> bool:
        return bool((await self._conn.execute(sql.LEFT_TO_LEGACY, {"b_id": job_id})).first())

    async def grant_of(self, job_id: str, holder: str) -> LeaseGrant:
        row = (
            await self._conn.execute(sql.SELECT_GRANT, {"b_id": job_id, "b_holder": holder})
        ).one()
        return claims.grant_of(row, "")

    async def lease_payloads(self, grants: Sequence[LeaseGrant]) -> list[LeasePayload]:
        if all(g.job_id in self.payload_rows for g in grants):
            return [queries.payload_of(g, self.payload_rows.pop(g.job_id)) for g in grants]
        return await queries.lease_payloads(self._conn, grants)

    async def lease_state(self, job_id: str) -> HeartbeatOutcome:
        row = (await self._conn.execute(sql.SELECT_LEASE_STATE, {"b_id": job_id})).one()
        return HeartbeatOutcome(row.lockUntil, row.cancelRequestedAt is not None)

    async def available_at(self, job_id: str) -> datetime:
        row = (await self._conn.execute(sql.SELECT_AVAILABLE_AT, {"b_id": job_id})).one()
        return row.availableAt  # type: ignore[no-any-return]

    async def snapshot(self, job_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        return await queries.snapshot_of(self._conn, job_id)

    async def page(
        self, filters: JobFilter, *, limit: int, before: tuple[datetime, str] | None = None
    ) -> list[JobRecord]:
        return await queries.page(
            self._conn, queries.filter_clauses(filters), limit=limit, before=before
        )

    async def awaiting_cancel(self, user_id: str, *, limit: int) -> list[JobRecord]:
        return await queries.awaiting_cancel(self._conn, user_id, limit=limit)


class SqlJobSweeps(JobSweeps):
    def __init__(self, conn: AsyncConnection, lease: LeaseTimes) -> None:
        self._conn = conn
        self._lease = lease

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
        "rootJobId": job.root_job_id,
        "treeDepth": job.tree_depth,
        "maxParallel": job.max_parallel,
        "joinPolicy": job.join_policy,
        "reasoningEffort": job.reasoning_effort,
        "prefixKey": job.prefix_key,
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
        "modelPinned": job.model_pinned,
        "tokenEstimate": job.token_estimate,
        "maxOutputTokens": job.max_output_tokens,
        "traceParent": job.trace_parent,
        "promptKey": job.prompt_key,
        "promptVersion": job.prompt_version,
        "inputSchemaVersion": job.input_schema_version,
        "outputSchemaVersion": job.output_schema_version,
        "snapshotId": job.snapshot_id,
        "deadlineAt": job.deadline_at,
        "costPolicy": job.cost_policy,
    }

"""Reads of the job table: one job, pages of jobs, the reaper's scans, lease payloads.

Each runs on the connection of the unit of work's transaction (or read) that the SQL job store
is bound to, so every read shares the writes' error mapping: an unreachable database is
UNAVAILABLE on every path.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Table,
    and_,
    bindparam,
    func,
    literal,
    or_,
    select,
    tuple_,
    union_all,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.core.records import (
    ArtifactRow,
    ExpiredLease,
    JobFilter,
    JobRecord,
    LeaseGrant,
    LeasePayload,
    StrandedJob,
    WatchState,
    watch_state,
)
from scheduler_service.core.routes import PRIMARY
from scheduler_service.core.state_machine import LifecycleStatus, parse_status
from scheduler_service.sql import job_statements as sql
from scheduler_service.sql.db.clock import db_now, db_today
from scheduler_service.sql.db.hints import running_rows_by_index
from scheduler_service.sql.db.models import AiJobArtifact, AiJobSnapshot, AiUserJobGate
from shared.job_types.reasoning import OFF

__all__ = [
    "active_and_today",
    "artifacts_of",
    "awaiting_cancel",
    "awaiting_cancel_clauses",
    "cancel_requested_held_by",
    "expired_deadlines",
    "expired_leases",
    "filter_clauses",
    "job_id_by_key",
    "lease_payloads",
    "page",
    "read_job",
    "snapshot_of",
]

_c = sql.jobs.c
_snapshots = cast(Table, AiJobSnapshot.__table__)
_gates = cast(Table, AiUserJobGate.__table__)
_artifacts = cast(Table, AiJobArtifact.__table__)
_Q, _R = LifecycleStatus.QUEUED.value, LifecycleStatus.RUNNING.value
_W = LifecycleStatus.WAITING.value

_mine = _c.userId == bindparam("b_user")
_ACTIVE_AND_TODAY = select(
    select(func.count())
    .where(
        _mine,
        sql.status_in((LifecycleStatus.QUEUED, LifecycleStatus.RUNNING, LifecycleStatus.WAITING)),
        # A tree counts once, as its root.
        _c.parentJobId.is_(None),
        sql.engine_owned(),
    )
    .scalar_subquery(),
    select(func.count())
    .where(_mine, _c.createdAt >= db_today(), sql.engine_owned())
    .scalar_subquery(),
)
_JOB_ID_BY_KEY = select(_c.id).where(
    _c.userId == bindparam("b_user"),
    _c.jobType == bindparam("b_type"),
    _c.idempotencyKey == bindparam("b_key"),
)
_ARTIFACTS = (
    select(_artifacts.c.artifactType, _artifacts.c.artifactId)
    .where(_artifacts.c.jobId == bindparam("b_id"))
    .order_by(_artifacts.c.ordinal)
)
_SNAPSHOT = select(_snapshots.c.content, _snapshots.c.params).where(
    _snapshots.c.jobId == bindparam("b_id")
)
_EXPIRED_LEASES = (
    select(
        _c.id,
        _c.jobType,
        _c.attemptCount,
        _c.maxAttempts,
        _c.cancelRequestedAt,
        _c.lockedBy,
        _c.waivedAttempts,
    )
    .where(
        _c.lifecycleStatus == _R,
        sql.overdue(),
        sql.engine_owned(),
        # A row the legacy worker runs holds no engine lease (adopted while it was processing):
        # it is left to finish there.
        _c.lockedBy.is_not(None),
    )
    .order_by(_c.lockUntil)
    .limit(bindparam("b_limit"))
)
_EXPIRED_DEADLINES = (
    select(_c.id)
    .where(
        _c.lifecycleStatus == _Q,
        _c.deadlineAt.is_not(None),
        _c.deadlineAt <= db_now(),
        sql.engine_owned(),
    )
    .limit(bindparam("b_limit"))
)
_CANCEL_REQUESTED_HELD = running_rows_by_index(
    select(_c.id, _c.attemptCount, _c.lockedBy).where(
        _c.lifecycleStatus == _R,
        _c.cancelRequestedAt.is_not(None),
        _c.lockedBy.in_(bindparam("b_holders", expanding=True)),
    )
)
_PAYLOAD_COLUMNS = [
    _c.jobType,
    _c.userId,
    _c.timeoutMs,
    _c.promptKey,
    _c.promptVersion,
    _c.modelName,
    _c.modelProvider,
    _c.modelTier,
    _c.credentialMode,
    _c.credentialId,
    _c.outputSchemaVersion,
    _c.maxOutputTokens,
    _c.traceParent,
    _c.reasoningEffort,
    _c.prefixKey,
    _snapshots.c.content,
    _snapshots.c.params,
]
#: A claim's grants and its leases' payloads in one read (the claim needs both).
GRANTS_WITH_PAYLOADS = (
    select(*sql.GRANT_COLUMNS, *_PAYLOAD_COLUMNS)
    .select_from(sql.jobs.outerjoin(_snapshots, _snapshots.c.jobId == _c.id))
    .where(_c.id.in_(bindparam("b_ids", expanding=True)))
)
_PAYLOADS = (
    select(_c.id, *_PAYLOAD_COLUMNS)
    .select_from(sql.jobs.outerjoin(_snapshots, _snapshots.c.jobId == _c.id))
    .where(_c.id.in_(bindparam("b_ids", expanding=True)))
)


async def read_job(conn: AsyncConnection, job_id: str) -> JobRecord | None:
    row = (await conn.execute(sql.SELECT_RECORD, {"b_id": job_id})).first()
    return None if row is None else JobRecord.from_mapping(dict(row._mapping))


_USERS: BindParameter[list[str]] = bindparam("b_users", expanding=True)
#: Each user's active count and created-today count ("a" and "t" rows) and their gate's
#: fair-dispatch place ("p" rows, for users with a place), in one read. A tree is active once,
#: as its root (queued, running or waiting on its children); its children are not counted.
_ACTIVE_TODAY_AND_PLACES_BY_USER = union_all(
    select(literal("a").label("kind"), _c.userId, func.count().label("n"))
    .where(
        _c.userId.in_(_USERS),
        _c.lifecycleStatus.in_([_Q, _R, _W]),
        _c.parentJobId.is_(None),
        sql.engine_owned(),
    )
    .group_by(_c.userId),
    select(literal("t").label("kind"), _c.userId, func.count().label("n"))
    .where(_c.userId.in_(_USERS), _c.createdAt >= db_today(), sql.engine_owned())
    .group_by(_c.userId),
    select(literal("p").label("kind"), _gates.c.userId, _gates.c.fairSeq.label("n")).where(
        _gates.c.userId.in_(_USERS), _gates.c.fairSeq.is_not(None)
    ),
)


async def active_today_and_places_of(
    conn: AsyncConnection, user_ids: Collection[str]
) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
    """Several users' active and created-today counts (two grouped counts on the per-user
    indexes) and their gates' fair-dispatch places, in one round trip."""
    users = sorted(user_ids)
    found = await conn.execute(_ACTIVE_TODAY_AND_PLACES_BY_USER, {"b_users": users})
    counts = {(str(kind), str(user)): int(n) for kind, user, n in found}
    places = {user: n for (kind, user), n in counts.items() if kind == "p"}
    return {u: (counts.get(("a", u), 0), counts.get(("t", u), 0)) for u in users}, places


async def read_jobs(conn: AsyncConnection, job_ids: Sequence[str]) -> dict[str, JobRecord]:
    rows = await conn.execute(sql.SELECT_RECORDS, {"b_ids": list(job_ids)})
    return {job.id: job for job in JobRecord.from_rows(list(rows.keys()), rows)}


async def job_ids_by_keys(
    conn: AsyncConnection, keys: Collection[tuple[str, str, str]]
) -> dict[tuple[str, str, str], str]:
    if not keys:
        return {}
    key = tuple_(_c.userId, _c.jobType, _c.idempotencyKey)
    rows = await conn.execute(
        select(_c.userId, _c.jobType, _c.idempotencyKey, _c.id).where(key.in_(sorted(keys)))
    )
    return {(r.userId, r.jobType, r.idempotencyKey): r.id for r in rows}


_WATCH_STATES = select(
    _c.id, _c.lifecycleStatus, _c.progress, _c.attemptCount, _c.cancelRequestedAt, _c.errorCode
).where(_c.id.in_(bindparam("b_ids", expanding=True)))


async def watch_states(conn: AsyncConnection, job_ids: Sequence[str]) -> dict[str, WatchState]:
    rows = await conn.execute(_WATCH_STATES, {"b_ids": list(job_ids)})
    return {
        r.id: watch_state(
            r.lifecycleStatus, r.progress, r.attemptCount, r.cancelRequestedAt, r.errorCode
        )
        for r in rows
    }


async def job_id_by_key(conn: AsyncConnection, user_id: str, job_type: str, key: str) -> str | None:
    found = await conn.execute(
        _JOB_ID_BY_KEY, {"b_user": user_id, "b_type": job_type, "b_key": key}
    )
    return found.scalar_one_or_none()


async def active_and_today(conn: AsyncConnection, user_id: str) -> tuple[int, int]:
    """The user's active jobs (a tree once, as its root), and the jobs they created today
    (database day)."""
    active, today = (await conn.execute(_ACTIVE_AND_TODAY, {"b_user": user_id})).one()
    return int(active), int(today)


async def artifacts_of(conn: AsyncConnection, job_id: str) -> list[ArtifactRow]:
    return [
        ArtifactRow(r.artifactType, r.artifactId)
        for r in await conn.execute(_ARTIFACTS, {"b_id": job_id})
    ]


async def snapshot_of(conn: AsyncConnection, job_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The job's input snapshot and params (empty when it has none)."""
    row = (await conn.execute(_SNAPSHOT, {"b_id": job_id})).first()
    return (row.content or {}, row.params or {}) if row else ({}, {})


async def page(
    conn: AsyncConnection,
    filters: Sequence[ColumnElement[bool]],
    *,
    limit: int,
    before: tuple[datetime, str] | None = None,
) -> list[JobRecord]:
    """Jobs matching ``filters``, newest first, after the ``before`` (createdAt, id) cursor."""
    query = select(*sql.RECORD_COLUMNS).where(*filters)
    if before is not None:
        created_at, job_id = before
        query = query.where(
            or_(_c.createdAt < created_at, and_(_c.createdAt == created_at, _c.id < job_id))
        )
    query = query.order_by(_c.createdAt.desc(), _c.id.desc()).limit(limit)
    rows = await conn.execute(query)
    return list(JobRecord.from_rows(list(rows.keys()), rows))


async def expired_leases(
    conn: AsyncConnection, grace_ms: int, *, limit: int = 100
) -> list[ExpiredLease]:
    """Running attempts past ``lockUntil`` + grace or past their timeout + grace (DB time)."""
    rows = await conn.execute(_EXPIRED_LEASES, {"b_grace_ms": grace_ms, "b_limit": limit})
    return [
        ExpiredLease(
            r.id,
            r.jobType,
            r.attemptCount,
            r.maxAttempts,
            r.cancelRequestedAt is not None,
            r.lockedBy,
            r.waivedAttempts,
        )
        for r in rows
    ]


_STRANDED = (
    select(_c.id, _c.jobType, _c.lifecycleStatus, _c.attemptCount)
    .where(
        _c.lifecycleStatus.in_([_Q, _R]),
        _c.jobType.not_in(bindparam("b_types", expanding=True)),
        sql.engine_owned(),
    )
    .limit(bindparam("b_limit"))
)


async def stranded_jobs(
    conn: AsyncConnection, registered: Collection[str], *, limit: int = 100
) -> list[StrandedJob]:
    """Queued or running jobs of types not in ``registered``."""
    rows = await conn.execute(_STRANDED, {"b_types": sorted(registered), "b_limit": limit})
    return [
        StrandedJob(r.id, r.jobType, parse_status(r.lifecycleStatus), r.attemptCount) for r in rows
    ]


async def expired_deadlines(conn: AsyncConnection, *, limit: int = 100) -> list[str]:
    """Queued jobs whose schedule-to-start deadline has passed."""
    return list((await conn.execute(_EXPIRED_DEADLINES, {"b_limit": limit})).scalars())


async def cancel_requested_held_by(
    conn: AsyncConnection, holders: Collection[str]
) -> list[tuple[str, int, str]]:
    """(job id, attempt, holder) of running jobs whose cancel was requested, among ``holders``."""
    rows = await conn.execute(_CANCEL_REQUESTED_HELD, {"b_holders": sorted(holders)})
    return [(r.id, r.attemptCount, r.lockedBy) for r in rows]


async def lease_payloads(conn: AsyncConnection, grants: Sequence[LeaseGrant]) -> list[LeasePayload]:
    """What each lease hands its runtime: the job's execution fields and its input, in order."""
    if not grants:
        return []
    found = await conn.execute(_PAYLOADS, {"b_ids": [g.job_id for g in grants]})
    rows = {r.id: r for r in found}
    return [payload_of(g, rows[g.job_id]) for g in grants]


def payload_of(grant: LeaseGrant, row: Any) -> LeasePayload:
    return LeasePayload(
        job_id=grant.job_id,
        job_type=row.jobType,
        attempt_no=grant.attempt_no,
        lock_until=grant.lock_until,
        timeout_ms=row.timeoutMs,
        snapshot=row.content or {},
        params=row.params or {},
        prompt_key=row.promptKey or "",
        prompt_version=row.promptVersion or "",
        model_name=row.modelName,
        credential_mode=row.credentialMode,
        credential_id=row.credentialId or "",
        output_schema_version=row.outputSchemaVersion or "",
        max_output_tokens=row.maxOutputTokens or 0,
        traceparent=row.traceParent or "",
        lease_token=grant.lease_token,
        user_id=row.userId,
        reasoning_effort=row.reasoningEffort or OFF,
        tell_first_token=row.prefixKey is not None,
        model_provider=row.modelProvider,
        model_tier=row.modelTier or PRIMARY,
    )


def filter_clauses(filters: JobFilter) -> list[ColumnElement[bool]]:
    """The WHERE of a ListJobs page (``lifecycle_status`` already checked by the caller)."""
    where: list[ColumnElement[bool]] = []
    if filters.user_id is not None:
        where.append(_c.userId == filters.user_id)
    if filters.job_type:
        where.append(_c.jobType == filters.job_type)
    if filters.lifecycle_status:
        where.append(_c.lifecycleStatus == filters.lifecycle_status)
    if filters.queue_name:
        where.append(_c.queueName == filters.queue_name)
    if filters.created_after is not None:
        where.append(_c.createdAt >= filters.created_after)
    if filters.created_before is not None:
        where.append(_c.createdAt < filters.created_before)
    if filters.error_code:
        where.append(_c.errorCode == filters.error_code)
    if filters.parent_job_id:
        where.append(_c.parentJobId == filters.parent_job_id)
    return where


async def awaiting_cancel(conn: AsyncConnection, user_id: str, *, limit: int) -> list[JobRecord]:
    """A user's jobs a cancel of all their jobs has not reached yet, trees' roots first (a
    root's cancel reaches its whole tree), then the newest."""
    query = (
        select(*sql.RECORD_COLUMNS)
        .where(*awaiting_cancel_clauses(user_id))
        .order_by(_c.treeDepth, _c.createdAt.desc(), _c.id.desc())
        .limit(limit)
    )
    rows = await conn.execute(query)
    return list(JobRecord.from_rows(list(rows.keys()), rows))


def awaiting_cancel_clauses(user_id: str) -> list[ColumnElement[bool]]:
    """A user's jobs that a cancel of all their jobs has not reached yet."""
    return [
        _c.userId == user_id,
        or_(
            _c.lifecycleStatus.in_((_Q, LifecycleStatus.WAITING.value)),
            and_(_c.lifecycleStatus == _R, _c.cancelRequestedAt.is_(None)),
        ),
        sql.engine_owned(),
    ]

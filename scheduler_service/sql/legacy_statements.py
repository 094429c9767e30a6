"""The SQL of adoption and of the contract step, on one connection each call (the caller's
transaction). Everything here reads or writes System A's side of ``AiAnalysisJob``: the legacy
``status``, ``sessionId`` and ``answerId`` columns, which the job store never names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, and_, bindparam, delete, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.core.ids import new_id
from scheduler_service.core.legacy_snapshots import LegacyAnswer, LegacyRow, Snapshot
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.legacy_models import AiLegacyJobType
from scheduler_service.sql.db.models import AiJobSnapshot
from scheduler_service.sql.db.multirow import insert_rows
from scheduler_service.sql.job_statements import jobs

__all__ = [
    "answer_of",
    "contract_blockers",
    "drop_legacy_schema",
    "has_legacy_status",
    "left_to_legacy",
    "owned_types",
    "release",
    "take_in",
    "waiting_count",
    "waiting_rows",
]

_c = jobs.c
_owned = cast(Table, AiLegacyJobType.__table__)
_snapshots = cast(Table, AiJobSnapshot.__table__)
_Q, _R = LifecycleStatus.QUEUED.value, LifecycleStatus.RUNNING.value
#: The tables of System B (``AiRuntimeJob``, ``AiRuntimeResult``), never used in production.
SYSTEM_B_TABLES = ("AiRuntimeJob", "AiRuntimeResult")
#: What the contract step drops from the job table (M-AI-05).
LEGACY_COLUMNS = ("status", "sessionId", "answerId")
TRIGGERS = ("trg_AiAnalysisJob_legacy_insert", "trg_AiAnalysisJob_legacy_update")

#: A legacy ``pending`` row the engine has not taken in: it names no prompt.
_WAITING = and_(
    _c.lifecycleStatus == _Q,
    _c.status == "pending",
    _c.promptVersion.is_(None),
)
_WAITING_ROWS = (
    select(_c.id, _c.userId, _c.jobType, _c.sessionId, _c.answerId)
    .where(_c.jobType.in_(bindparam("b_types", expanding=True)), _WAITING)
    .order_by(_c.createdAt, _c.id)
    .limit(bindparam("b_limit"))
)
#: The same among rows legacy code wrote since migration 0013 (through its index): the intake's
#: periodic look for rows System A's producer still inserts after adoption.
_RECENT_WAITING_ROWS = _WAITING_ROWS.where(_c.legacyWrittenAt.is_not(None))
_WAITING_COUNT = select(func.count()).where(_c.jobType == bindparam("b_type"), _WAITING)
#: Rows the legacy worker is running: running without an engine lease.
_LEGACY_RUNNING = and_(_c.lifecycleStatus == _R, _c.lockedBy.is_(None))
_LEFT_COUNT = select(func.count()).where(_c.jobType == bindparam("b_type"), _LEGACY_RUNNING)
_OWNED = select(_owned.c.jobType).order_by(_owned.c.jobType)
_RELEASE = delete(_owned).where(_owned.c.jobType == bindparam("b_type"))
_ADOPT_VALUES = (
    "queueName",
    "priority",
    "maxAttempts",
    "timeoutMs",
    "triggerType",
    "targetType",
    "targetId",
    "credentialMode",
    "modelProvider",
    "modelName",
    "maxOutputTokens",
    "promptKey",
    "promptVersion",
    "inputSchemaVersion",
    "outputSchemaVersion",
)
#: One row taken in, by compare-and-set on its legacy state: a row the legacy worker started
#: meanwhile (``processing``) or another replica took in is not matched.
_TAKE_IN = (
    update(jobs)
    .where(_c.id == bindparam("b_id"), _WAITING)
    .values(
        {name: bindparam(f"v_{name}") for name in _ADOPT_VALUES}
        | {
            "snapshotId": bindparam("v_snapshotId"),
            "availableAt": db_now(),
            "queuedAt": func.coalesce(_c.queuedAt, db_now()),
            "updatedAt": db_now(),
        }
    )
)
_LAST_LEGACY_WRITE = select(func.max(_c.legacyWrittenAt), db_now())
_WAITING_ANYWHERE = select(func.count()).where(_WAITING)
_RUNNING_ANYWHERE = select(func.count()).where(_LEGACY_RUNNING)


async def has_legacy_status(conn: AsyncConnection) -> bool:
    """Whether the job table still has the legacy ``status`` column (not contracted)."""
    return "status" in await _columns(conn)


async def _columns(conn: AsyncConnection) -> set[str]:
    if conn.dialect.name == "sqlite":
        rows = await conn.execute(text("SELECT name FROM pragma_table_info('AiAnalysisJob')"))
    else:
        rows = await conn.execute(
            text(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS"
                " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'AiAnalysisJob'"
            )
        )
    return {str(name) for (name,) in rows}


async def owned_types(conn: AsyncConnection) -> list[str]:
    return list((await conn.execute(_OWNED)).scalars())


async def release(conn: AsyncConnection, job_type: str) -> bool:
    """The engine owns ``job_type`` from now on; False if it already did."""
    return (await conn.execute(_RELEASE, {"b_type": job_type})).rowcount == 1


async def waiting_count(conn: AsyncConnection, job_type: str) -> int:
    return int((await conn.execute(_WAITING_COUNT, {"b_type": job_type})).scalar_one())


async def left_to_legacy(conn: AsyncConnection, job_type: str) -> int:
    return int((await conn.execute(_LEFT_COUNT, {"b_type": job_type})).scalar_one())


async def waiting_rows(
    conn: AsyncConnection, job_types: Sequence[str], *, limit: int, recent_only: bool = False
) -> list[LegacyRow]:
    statement = _RECENT_WAITING_ROWS if recent_only else _WAITING_ROWS
    rows = await conn.execute(statement, {"b_types": sorted(job_types), "b_limit": limit})
    return [LegacyRow(r.id, r.userId, r.jobType, r.sessionId, r.answerId) for r in rows]


async def answer_of(conn: AsyncConnection, query: str, row: LegacyRow) -> LegacyAnswer | None:
    """The learner's answer ``row`` names, by the operator's query (``:answer_id``,
    ``:user_id``; columns ``answer`` and, optionally, ``question``)."""
    if not row.answer_id:
        return None
    found = (
        (await conn.execute(text(query), {"answer_id": row.answer_id, "user_id": row.user_id}))
        .mappings()
        .first()
    )
    if found is None or found.get("answer") is None:
        return None
    question = found.get("question")
    return LegacyAnswer(None if question is None else str(question), str(found["answer"]))


async def take_in(
    conn: AsyncConnection, row: LegacyRow, columns: Mapping[str, Any], snapshot: Snapshot
) -> bool:
    """Give ``row`` the engine's columns and its snapshot; False if it moved meanwhile."""
    snapshot_id = new_id()
    values = {f"v_{name}": columns[name] for name in _ADOPT_VALUES}
    taken = await conn.execute(
        _TAKE_IN, {"b_id": row.job_id, "v_snapshotId": snapshot_id, **values}
    )
    if taken.rowcount != 1:
        return False
    await insert_rows(
        conn,
        _snapshots,
        [
            {
                "id": snapshot_id,
                "jobId": row.job_id,
                "schemaVersion": snapshot.schema_version,
                "content": snapshot.content,
                "params": {},
            }
        ],
    )
    return True


async def contract_blockers(
    conn: AsyncConnection, *, quiet_days: int, as_of: datetime | None = None
) -> list[str]:
    """What stops the contract step, one line each; empty when it may run."""
    blockers = [
        f"job type {job_type!r} is still owned by System A (AdoptLegacyJobs hands it over)"
        for job_type in await owned_types(conn)
    ]
    last, db_clock = (await conn.execute(_LAST_LEGACY_WRITE)).one()
    now = as_of or db_clock
    if last is not None and (now - last).total_seconds() < quiet_days * 86_400:
        blockers.append(
            f"legacy code wrote a job row at {last:%Y-%m-%d %H:%M:%S} UTC, within the last "
            f"{quiet_days} days (--quiet-days)"
        )
    running = int((await conn.execute(_RUNNING_ANYWHERE)).scalar_one())
    if running:
        blockers.append(f"{running} job rows are being run by the legacy worker (processing)")
    waiting = int((await conn.execute(_WAITING_ANYWHERE)).scalar_one())
    if waiting:
        blockers.append(
            f"{waiting} legacy pending rows are not taken in yet (AdoptLegacyJobs takes them)"
        )
    for table in SYSTEM_B_TABLES:
        if await _has_table(conn, table):
            count = int((await conn.execute(text(f"SELECT COUNT(*) FROM {table}"))).scalar_one())
            if count:
                blockers.append(f"table {table} holds {count} rows")
    return blockers


async def _has_table(conn: AsyncConnection, table: str) -> bool:
    return bool(await conn.run_sync(lambda sync: sync.dialect.has_table(sync, table)))


async def drop_legacy_schema(conn: AsyncConnection) -> list[str]:
    """M-AI-05 and M-AI-08: drop the shadow-write triggers, the legacy columns and System B's
    tables; returns what was dropped."""
    dropped: list[str] = []
    for trigger in TRIGGERS:
        await conn.execute(text(f"DROP TRIGGER IF EXISTS {trigger}"))
        dropped.append(f"trigger {trigger}")
    present = await _columns(conn)
    columns = [c for c in LEGACY_COLUMNS if c in present]
    if columns and conn.dialect.name == "sqlite":
        for column in columns:
            await conn.execute(text(f"ALTER TABLE AiAnalysisJob DROP COLUMN {column}"))
    elif columns:
        drops = ", ".join(f"DROP COLUMN `{column}`" for column in columns)
        await conn.execute(text(f"ALTER TABLE AiAnalysisJob {drops}"))
    dropped += [f"column AiAnalysisJob.{column}" for column in columns]
    for table in SYSTEM_B_TABLES:
        if await _has_table(conn, table):
            await conn.execute(text(f"DROP TABLE {table}"))
            dropped.append(f"table {table}")
    return dropped

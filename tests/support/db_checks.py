"""Reading what the scheduler wrote, for assertions."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Table, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.sql.db.models import (
    AiJob,
    AiJobArtifact,
    AiJobSnapshot,
    AiUsageLog,
    OutboxEvent,
)
from scheduler_service.sql.db.output_models import AiJobOutputChunk
from scheduler_service.sql.legacy_statements import LEGACY_COLUMNS, has_legacy_status

JOBS = cast(Table, AiJob.__table__)
ARTIFACTS = cast(Table, AiJobArtifact.__table__)
SNAPSHOTS = cast(Table, AiJobSnapshot.__table__)
USAGE = cast(Table, AiUsageLog.__table__)
OUTBOX = cast(Table, OutboxEvent.__table__)
CHUNKS = cast(Table, AiJobOutputChunk.__table__)


async def job_row(engine: AsyncEngine, job_id: str) -> dict[str, Any]:
    """Every column of the job's row; System A's are absent once the contract step ran."""
    async with engine.connect() as conn:
        expanded = await has_legacy_status(conn)
        columns = [c for c in JOBS.c if expanded or c.name not in LEGACY_COLUMNS]
        return dict(
            (await conn.execute(select(*columns).where(JOBS.c.id == job_id))).one()._mapping
        )


async def count(engine: AsyncEngine, table: Table, **where: Any) -> int:
    query = select(func.count()).select_from(table)
    for column, value in where.items():
        query = query.where(table.c[column] == value)
    async with engine.connect() as conn:
        return int((await conn.execute(query)).scalar_one())


async def events(engine: AsyncEngine, job_id: str) -> list[str]:
    query = select(OUTBOX.c.eventType).where(OUTBOX.c.aggregateId == job_id).order_by(OUTBOX.c.id)
    async with engine.connect() as conn:
        return list((await conn.execute(query)).scalars())

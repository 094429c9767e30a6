"""Migrations: empty databases to head, re-runs as no-ops, the legacy upgrade, schema agreement."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import JSON, inspect, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.sql.db.base import Base
from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.db.models import AiJob
from scheduler_service.sql.migrate import migrate
from tests.conftest import DatabaseFactory
from tests.support.db import make_job
from tests.support.store import StoreCalls

LEGACY_SQL = Path(__file__).resolve().parent.parent / "fixtures" / "legacy-schema.sql"
LEGACY_COLUMNS = {
    "id", "userId", "sessionId", "answerId", "jobType", "status", "progress", "errorMessage",
    "queuedAt", "startedAt", "completedAt", "createdAt", "updatedAt",
}  # fmt: skip
RENAMED = {"completedAt": "finishedAt", "errorMessage": "internalErrorMessage"}
BACKFILL = {
    "pending": "queued",
    "processing": "running",
    "completed": "succeeded",
    "failed": "failed",
}


def _legacy_statements() -> list[str]:
    body = re.sub(r"^--.*$", "", LEGACY_SQL.read_text(), flags=re.MULTILINE)
    return [s.strip() for s in body.split(";") if s.strip()]


async def _fetch_all(engine: AsyncEngine, sql: str) -> list[dict[str, Any]]:
    async with engine.connect() as conn:
        return [dict(r._mapping) for r in await conn.execute(text(sql))]


def _diff(conn: Connection) -> list[Any]:
    def compare_type(_ctx: Any, _col: Any, reflected: Any, model: Any, *_: Any) -> bool | None:
        # MariaDB stores JSON as LONGTEXT with a json_valid() check; that is its JSON.
        if isinstance(model, JSON) and "TEXT" in type(reflected).__name__.upper():
            return False
        return None

    context = MigrationContext.configure(
        conn, opts={"compare_type": compare_type, "compare_server_default": False}
    )
    diffs = compare_metadata(context, Base.metadata)
    return [d for d in diffs if not (isinstance(d, tuple) and d[1:2] == ("alembic_version",))]


async def assert_schema_matches_models(url: str) -> None:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            assert await conn.run_sync(_diff) == []
    finally:
        await engine.dispose()


async def _revision(url: str) -> str:
    engine = create_engine(url, pool_size=1)
    try:
        rows = await _fetch_all(engine, "SELECT version_num FROM alembic_version")
    finally:
        await engine.dispose()
    return str(rows[0]["version_num"])


async def test_empty_database_to_head_and_again(database: DatabaseFactory) -> None:
    url = await database()
    await migrate(url)
    assert await _revision(url) == "0022"
    await migrate(url)  # a no-op
    assert await _revision(url) == "0022"
    await assert_schema_matches_models(url)


@pytest.mark.mysql
async def test_legacy_table_with_rows_is_upgraded_in_place(mysql_database: DatabaseFactory) -> None:
    url = await mysql_database()
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn:
            for statement in _legacy_statements():
                await conn.execute(text(statement))
        before = await _fetch_all(engine, "SELECT * FROM AiAnalysisJob ORDER BY id")
        assert len(before) == 9 and set(before[0]) == LEGACY_COLUMNS

        await migrate(url)
        await migrate(url)  # idempotent on an upgraded legacy database too

        after = await _fetch_all(engine, "SELECT * FROM AiAnalysisJob ORDER BY id")
        columns = set(after[0])
        assert {RENAMED.get(c, c) for c in LEGACY_COLUMNS} <= columns, "a legacy column was dropped"
        assert not set(RENAMED) & columns
        assert [r["id"] for r in after] == [r["id"] for r in before]
        for old, new in zip(before, after, strict=True):
            for column in LEGACY_COLUMNS:
                assert new[RENAMED.get(column, column)] == old[column], (old["id"], column)
            assert new["lifecycleStatus"] == BACKFILL[old["status"]], old["id"]
            assert new["availableAt"] == (old["queuedAt"] or old["createdAt"])
            assert new["attemptCount"] == 0 and new["queueName"] == "ai-interactive"
    finally:
        await engine.dispose()
    await assert_schema_matches_models(url)


@pytest.mark.mysql
async def test_widened_job_type_and_utf8mb4_on_legacy_upgrade(
    mysql_database: DatabaseFactory,
) -> None:
    url = await mysql_database()
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn:
            for statement in _legacy_statements():
                await conn.execute(text(statement))
        await migrate(url)

        def job_type_length(conn: Connection) -> int:
            column = next(
                c for c in inspect(conn).get_columns("AiAnalysisJob") if c["name"] == "jobType"
            )
            return int(column["type"].length)  # type: ignore[attr-defined]

        async with engine.connect() as conn:
            assert await conn.run_sync(job_type_length) == 64
        long_type = "flashcard_generation_" + "x" * 40
        await StoreCalls(engine).create(make_job(job_id="new-1", job_type=long_type))
        async with engine.connect() as conn:
            stored = (
                await conn.execute(select(AiJob.jobType).where(AiJob.id == "new-1"))
            ).scalar_one()
            assert stored == long_type
    finally:
        await engine.dispose()

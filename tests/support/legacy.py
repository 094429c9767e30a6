"""A database upgraded from System A's table (tests/fixtures/legacy-schema.sql), and System A's
writes as it makes them: raw SQL naming none of the engine's columns."""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy import text

from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.migrate import migrate
from tests.conftest import DatabaseFactory

LEGACY_SQL = Path(__file__).resolve().parent.parent / "fixtures" / "legacy-schema.sql"
#: The application's answers, as the default AIJOB_LEGACY_ANSWER_QUERY reads them.
ANSWERS_TABLE = (
    "CREATE TABLE LearnerAnswer (id VARCHAR(191) PRIMARY KEY, userId VARCHAR(191) NOT NULL,"
    " question TEXT NULL, answer TEXT NOT NULL)"
)


async def run_sql(url: str, statement: str, **params: object) -> None:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(statement), params)
    finally:
        await engine.dispose()


async def legacy_database(mysql_database: DatabaseFactory) -> str:
    """A database holding the legacy table and its rows, migrated to the newest schema."""
    url = await mysql_database()
    body = re.sub(r"^--.*$", "", LEGACY_SQL.read_text(), flags=re.MULTILINE)
    for statement in (s.strip() for s in body.split(";")):
        if statement:
            await run_sql(url, statement)
    await migrate(url)
    return url


async def produce(url: str, job_id: str, user_id: str, job_type: str, **columns: object) -> None:
    """System A's producer (or worker, with ``status``) inserting a row."""
    values = {"status": "pending", "answerId": None, **columns}
    names = ", ".join(values)
    placeholders = ", ".join(f":{name}" for name in values)
    await run_sql(
        url,
        f"INSERT INTO AiAnalysisJob (id, userId, jobType, progress, createdAt, updatedAt, {names})"
        f" VALUES (:id, :user, :type, 0, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), {placeholders})",
        id=job_id,
        user=user_id,
        type=job_type,
        **values,
    )


async def work(url: str, job_id: str, status: str) -> None:
    """System A's worker moving a row."""
    await run_sql(url, "UPDATE AiAnalysisJob SET status = :s WHERE id = :id", s=status, id=job_id)

"""Helpers for database tests: creating jobs and reading raw rows."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

from sqlalchemy import Table, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.core.ids import new_id
from scheduler_service.core.records import NewJob
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.models import AiJob
from tests.support.store import StoreCalls


def make_job(**overrides: Any) -> NewJob:
    values: dict[str, Any] = {
        "job_id": new_id(),
        "user_id": "user-1",
        "job_type": "synthetic_echo",
        "queue_name": "ai-interactive",
        "priority": 50,
        "max_attempts": 3,
        "timeout_ms": 30_000,
        # Every engine insert names its prompt; a row without one is System A's (migration 0013).
        "prompt_version": "v1",
    }
    values.update(overrides)
    return NewJob(**values)


async def create_job(repo: StoreCalls, engine: AsyncEngine, **overrides: Any) -> str:
    job = make_job(**overrides)
    await repo.create(job)
    return job.job_id


async def raw_row(engine: AsyncEngine, job_id: str) -> dict[str, Any]:
    async with engine.connect() as conn:
        row = (
            await conn.execute(select(AiJob.__table__).where(AiJob.__table__.c.id == job_id))
        ).one()
    return dict(row._mapping)


async def shift_times(engine: AsyncEngine, job_id: str, **seconds: float) -> None:
    """Move time columns of a job by whole seconds into the past (negative) or future.

    A test fixture, not a lifecycle write: it never touches ``lifecycleStatus``.
    """
    table = cast(Table, AiJob.__table__)
    async with engine.begin() as conn:
        row = (await conn.execute(select(table).where(table.c.id == job_id))).one()._mapping
        values = {col: row[col] + timedelta(seconds=delta) for col, delta in seconds.items()}
        await conn.execute(update(table).where(table.c.id == job_id).values(values))


async def db_now_value(engine: AsyncEngine) -> Any:
    async with engine.connect() as conn:
        return (await conn.execute(select(db_now()))).scalar_one()


__all__ = ["create_job", "db_now_value", "make_job", "raw_row", "shift_times"]

"""Alembic environment: runs migrations on the connection it is handed, or on AIJOB_DATABASE_URL."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from scheduler_service.sql.db import models  # noqa: F401  (every table on Base.metadata)
from scheduler_service.sql.db.base import Base
from scheduler_service.sql.db.engine import create_engine
from scheduler_service.wiring.settings import SchedulerSettings

target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()


async def _run_on_settings_url() -> None:
    engine = create_engine(SchedulerSettings().database_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_run)
    finally:
        await engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported: run against a database")

connection = context.config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    asyncio.run(_run_on_settings_url())

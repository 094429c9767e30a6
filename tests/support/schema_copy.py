"""Freshly migrated MariaDB databases in a fraction of alembic's time.

The session's first MySQL database is migrated by alembic (``scheduler_service.sql.migrate``); its
tables as the server describes them (``SHOW CREATE TABLE``: columns, indexes, foreign keys,
charset), its triggers and the rows the migrations seed (``alembic_version``, the outbox sequence)
are kept, and every later database gets the same by replaying them: a dozen statements instead of
ten migrations' worth of DDL, per test. ``tests/db/test_migrations.py`` still runs alembic itself.
SQLite databases are always migrated by alembic (it is fast there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url

from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.migrate import migrate

__all__ = ["Table", "migrated", "tables_of", "triggers_of"]


@dataclass(frozen=True)
class Table:
    name: str
    create: str
    rows: list[dict[str, Any]]


#: A captured trigger's definer is whoever ran the migration on that server; replayed elsewhere
#: (a test's own MariaDB started without grant tables knows only the anonymous user) it must be
#: whoever replays it.
_DEFINER = re.compile(r"^CREATE\s+DEFINER\s*=\s*(?:`[^`]*`|\S+?)(?:@(?:`[^`]*`|\S+))?\s+", re.I)

_captured: list[Table] = []
_captured_triggers: list[str] = []


async def migrated(url: str) -> None:
    """Give the empty database at ``url`` the migrated schema and its seeded rows."""
    if make_url(url).get_backend_name() != "mysql":
        await migrate(url)
        return
    if not _captured:
        await migrate(url)
        _captured.extend(await tables_of(url))
        _captured_triggers.extend((await triggers_of(url)).values())
        return
    await _replay(url, _captured, _captured_triggers)


async def tables_of(url: str) -> list[Table]:
    """Every table of the database at ``url``, as the server describes it, with its rows."""
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            names = [
                row[0]
                for row in await conn.exec_driver_sql(
                    "SHOW FULL TABLES WHERE Table_type = 'BASE TABLE'"
                )
            ]
            tables = []
            for name in names:
                described = await conn.exec_driver_sql(f"SHOW CREATE TABLE `{name}`")
                create = described.one()._mapping["Create Table"]
                rows = [
                    dict(r._mapping) for r in await conn.exec_driver_sql(f"SELECT * FROM `{name}`")
                ]
                tables.append(Table(name, str(create), rows))
            return tables
    finally:
        await engine.dispose()


async def triggers_of(url: str) -> dict[str, str]:
    """Every trigger of the database at ``url`` (the shadow write's), by name: its CREATE."""
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            names = [row[0] for row in await conn.exec_driver_sql("SHOW TRIGGERS")]
            creates = {}
            for name in names:
                described = await conn.exec_driver_sql(f"SHOW CREATE TRIGGER `{name}`")
                original = str(described.one()._mapping["SQL Original Statement"])
                creates[name] = _DEFINER.sub("CREATE ", original, count=1)
            return creates
    finally:
        await engine.dispose()


async def _replay(url: str, tables: list[Table], triggers: list[str]) -> None:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn:
            # Tables come in name order, not in the order their foreign keys need.
            await conn.exec_driver_sql("SET SESSION foreign_key_checks = 0")
            for table in tables:
                await conn.exec_driver_sql(table.create)
            for table in tables:
                if table.rows:
                    columns = list(table.rows[0])
                    statement = text(
                        f"INSERT INTO `{table.name}` ({', '.join(f'`{c}`' for c in columns)})"
                        f" VALUES ({', '.join(f':{c}' for c in columns)})"
                    )
                    await conn.execute(statement, table.rows)
            await conn.exec_driver_sql("SET SESSION foreign_key_checks = 1")
            for trigger in triggers:
                await conn.exec_driver_sql(trigger)
    finally:
        await engine.dispose()

"""INSERT that treats a unique-key collision as success: the row is already there."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Executable, Table
from sqlalchemy.dialects.mysql import insert as mysql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.db.clock import db_now


async def insert_ignoring_duplicates(
    conn: AsyncConnection,
    table: Table,
    rows: Sequence[dict[str, Any]],
    *,
    stamped: tuple[str, ...] = ("createdAt",),
) -> None:
    """Insert ``rows`` (plain values); the ``stamped`` columns get the database's now."""
    if not rows:
        return
    statement = _statement(conn.dialect.name, table, stamped)
    await conn.execute(statement, rows[0] if len(rows) == 1 else list(rows))


@functools.cache
def _statement(dialect: str, table: Table, stamped: tuple[str, ...]) -> Executable:
    # Built once per table: building a statement costs more than executing a cached one.
    now = {column: db_now() for column in stamped}
    if dialect == "sqlite":
        return sqlite_insert(table).values(now).on_conflict_do_nothing()
    # Not INSERT IGNORE: that would also swallow truncation and other data errors.
    primary = next(iter(table.primary_key.columns))
    statement = mysql_insert(table).values(now)
    return statement.on_duplicate_key_update({primary.name: statement.inserted[primary.name]})

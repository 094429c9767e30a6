"""INSERT that treats a unique-key collision as success: the row is already there."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects.mysql import insert as mysql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection


async def insert_ignoring_duplicates(
    conn: AsyncConnection, table: Table, rows: Sequence[dict[str, Any]]
) -> None:
    if not rows:
        return
    # One multi-row INSERT: values may be SQL expressions such as db_now().
    if conn.dialect.name == "sqlite":
        await conn.execute(sqlite_insert(table).values(list(rows)).on_conflict_do_nothing())
        return
    # Not INSERT IGNORE: that would also swallow truncation and other data errors.
    primary = next(iter(table.primary_key.columns))
    statement = mysql_insert(table).values(list(rows))
    await conn.execute(
        statement.on_duplicate_key_update({primary.name: statement.inserted[primary.name]})
    )

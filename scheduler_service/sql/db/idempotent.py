"""INSERT that treats a unique-key collision as success: the row is already there."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Executable, Table
from sqlalchemy.dialects.mysql import insert as mysql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.multirow import insert_rows


async def insert_ignoring_duplicates(
    conn: AsyncConnection,
    table: Table,
    rows: Sequence[dict[str, Any]],
    *,
    stamped: tuple[str, ...] = ("createdAt",),
    later: bool = False,
) -> None:
    """Insert ``rows`` (plain values); the ``stamped`` columns get the database's now. With
    ``later``, the insert joins the transaction's next round trip (``insert_rows``)."""
    if len(rows) > 1 or (rows and later):
        # One statement per chunk: the driver's executemany would send a statement per row.
        await insert_rows(conn, table, rows, stamped=stamped, ignore_duplicates=True, later=later)
    elif rows:
        await conn.execute(_statement(conn.dialect.name, table, stamped), rows[0])


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

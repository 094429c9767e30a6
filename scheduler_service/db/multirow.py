"""Multi-row INSERT statements, built once per table, columns and chunk size.

A list of rows handed to ``conn.execute`` becomes the driver's executemany, and asyncmy (like
PyMySQL) folds that into one multi-row INSERT only when the VALUES list holds nothing but
placeholders; rows that carry the database clock (``createdAt = now(3)``) went to the server one
statement each. These statements put a chunk of rows in one VALUES list, the clock in SQL and a
bind parameter per row and column. Chunks are powers of two (37 rows: 32, 4, 1), so each table has
a handful of statement shapes, each compiled once, rather than one per row count.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Executable, Table, bindparam, insert
from sqlalchemy.dialects.mysql import insert as mysql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.db.clock import db_now

__all__ = ["MAX_CHUNK", "insert_rows"]

#: Most rows one statement carries (a power of two).
MAX_CHUNK = 128

Fixed = tuple[tuple[str, Any], ...]


async def insert_rows(
    conn: AsyncConnection,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    *,
    stamped: Sequence[str] = ("createdAt",),
    fixed: Mapping[str, Any] | None = None,
    ignore_duplicates: bool = False,
) -> None:
    """Insert ``rows``; the ``stamped`` columns get the database's now, the ``fixed`` ones the
    same value in every row. With ``ignore_duplicates``, a row whose primary key exists is left
    as it is (not INSERT IGNORE, which would also swallow truncation and other data errors)."""
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(sorted(row)), []).append(row)
    for columns, group in groups.items():
        for chunk in _chunks(group):
            statement = _statement(
                conn.dialect.name,
                table,
                columns,
                rows=len(chunk),
                stamped=tuple(stamped),
                fixed=tuple(sorted((fixed or {}).items())),
                ignore_duplicates=ignore_duplicates,
            )
            params = {f"{c}_{k}": row[c] for k, row in enumerate(chunk) for c in columns}
            await conn.execute(statement, params)


def _chunks(rows: Sequence[Mapping[str, Any]]) -> list[Sequence[Mapping[str, Any]]]:
    chunks = []
    start = 0
    while start < len(rows):
        size = min(MAX_CHUNK, 1 << ((len(rows) - start).bit_length() - 1))
        chunks.append(rows[start : start + size])
        start += size
    return chunks


@functools.cache
def _statement(
    dialect: str,
    table: Table,
    columns: tuple[str, ...],
    *,
    rows: int,
    stamped: tuple[str, ...],
    fixed: Fixed,
    ignore_duplicates: bool,
) -> Executable:
    values = [
        {
            **{c: bindparam(f"{c}_{k}", type_=table.c[c].type) for c in columns},
            **{c: db_now() for c in stamped},
            **dict(fixed),
        }
        for k in range(rows)
    ]
    if not ignore_duplicates:
        return insert(table).values(values)
    if dialect == "sqlite":
        return sqlite_insert(table).values(values).on_conflict_do_nothing()
    primary = next(iter(table.primary_key.columns))
    statement = mysql_insert(table).values(values)
    return statement.on_duplicate_key_update({primary.name: statement.inserted[primary.name]})

"""Multi-row INSERT statements: one statement for many rows, compiled once per table shape.

A list of rows handed to ``conn.execute`` becomes the driver's executemany, and asyncmy (like
PyMySQL) folds that into one multi-row INSERT only when the VALUES list holds nothing but
placeholders; rows that carry the database clock (``createdAt = now(3)``) went to the server one
statement each. Here a one-row INSERT is compiled once per (table, columns) and its VALUES tuple
repeated for the rows of a call, the clock in SQL and a placeholder per row and column, sent with
``exec_driver_sql`` with the columns' bind processing (JSON) applied the way SQLAlchemy would.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, bindparam, func, insert
from sqlalchemy.dialects.mysql import insert as mysql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.driver import write_sql_later

__all__ = ["MAX_CHUNK", "insert_rows", "insert_rows_returning"]

#: Most rows one statement carries.
MAX_CHUNK = 500

Fixed = tuple[tuple[str, Any], ...]


async def insert_rows(
    conn: AsyncConnection,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    *,
    stamped: Sequence[str] = ("createdAt",),
    fixed: Mapping[str, Any] | None = None,
    ignore_duplicates: bool = False,
    accumulate: Sequence[str] = (),
    replace: Sequence[str] = (),
    prefix: str = "",
    later: bool = False,
    after_last_insert_id: Sequence[str] = (),
) -> None:
    """Insert ``rows``; the ``stamped`` columns get the database's now, the ``fixed`` ones the
    same value in every row, the ``after_last_insert_id`` ones (MySQL) the session's
    ``LAST_INSERT_ID()`` plus the row's value. With ``ignore_duplicates``, a row whose primary
    key exists is left as it is (not INSERT IGNORE, which would also swallow truncation and
    other data errors); with ``accumulate``, such a row's ``accumulate`` columns are added to
    the existing row's (a counter's upsert: many keys, one statement); with ``replace``, they
    take the new row's values (many keys set, one statement). ``prefix`` goes before each
    statement (a constant of the caller's, never input). With ``later``, the statements join
    the transaction's next round trip (:func:`~scheduler_service.sql.db.driver.write_sql_later`)."""
    for template, chunk in _chunks(
        conn.dialect,
        table,
        rows,
        stamped=stamped,
        fixed=fixed,
        ignore_duplicates=ignore_duplicates,
        accumulate=tuple(accumulate),
        replace=tuple(replace),
        after_last_insert_id=tuple(after_last_insert_id),
    ):
        sql, values = prefix + template.sql(len(chunk)), template.parameters(chunk)
        if later:
            await write_sql_later(conn, sql, values)
        else:
            await conn.exec_driver_sql(sql, values)


async def insert_rows_returning(
    conn: AsyncConnection,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    returning: Sequence[str],
    *,
    stamped: Sequence[str] = ("createdAt",),
    fixed: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]] | None:
    """:func:`insert_rows` that answers the rows as written, their ``returning`` columns in
    insert order (``INSERT ... RETURNING``: the row costs no read after it); None, with the
    rows inserted, where the database cannot (MySQL, MariaDB before 10.5)."""
    dialect = conn.dialect
    if not dialect.insert_returning:
        await insert_rows(conn, table, rows, stamped=stamped, fixed=fixed)
        return None
    quote = dialect.identifier_preparer.quote
    clause = " RETURNING " + ", ".join(quote(column) for column in returning)
    processors = [
        table.c[column].type.dialect_impl(dialect).result_processor(dialect, None)
        for column in returning
    ]
    written: list[dict[str, Any]] = []
    for template, chunk in _chunks(dialect, table, rows, stamped=stamped, fixed=fixed):
        found = await conn.exec_driver_sql(
            template.sql(len(chunk)) + clause, template.parameters(chunk)
        )
        written.extend(
            {
                column: value if process is None else process(value)
                for column, value, process in zip(returning, values, processors, strict=True)
            }
            for values in found.all()
        )
    return written


def _chunks(
    dialect: Dialect,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    *,
    stamped: Sequence[str],
    fixed: Mapping[str, Any] | None,
    ignore_duplicates: bool = False,
    accumulate: tuple[str, ...] = (),
    replace: tuple[str, ...] = (),
    after_last_insert_id: tuple[str, ...] = (),
) -> Iterator[tuple[_Template, Sequence[Mapping[str, Any]]]]:
    """The rows by the columns they carry, each group in statements of at most MAX_CHUNK
    rows, with the template that writes them."""
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(sorted(row)), []).append(row)
    for columns, group in groups.items():
        template = _template(
            dialect,
            table,
            columns,
            stamped=tuple(stamped),
            fixed=tuple(sorted((fixed or {}).items())),
            ignore_duplicates=ignore_duplicates,
            accumulate=accumulate,
            replace=replace,
            after_last_insert_id=after_last_insert_id,
        )
        for start in range(0, len(group), MAX_CHUNK):
            yield template, group[start : start + MAX_CHUNK]


@dataclass(frozen=True)
class _Template:
    """A one-row INSERT compiled once, whose VALUES tuple is repeated for as many rows as a call
    has: SQLAlchemy does not cache multi-row VALUES statements, and compiling one per row count
    cost more than the round trips it saves."""

    prefix: str
    row: str
    suffix: str
    #: Per placeholder of the row tuple: the column a row supplies, or None for a constant.
    slots: tuple[str | None, ...]
    #: The constants' values (the clock's offsets, the fixed columns), by placeholder.
    constants: tuple[Any, ...]
    processors: Mapping[str, Callable[[Any], Any]]

    def sql(self, rows: int) -> str:
        return self.prefix + ", ".join([self.row] * rows) + self.suffix

    def parameters(self, rows: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
        # Every row of a batch goes through here (usage, artifacts, outbox…): the slots'
        # kinds are resolved once per template, not once per value.
        plan = self._plan
        values: list[Any] = []
        append = values.append
        for row in rows:
            for column, constant, process in plan:
                if column is None:
                    append(constant)
                elif process is None:
                    append(row[column])
                else:
                    append(process(row[column]))
        return tuple(values)

    @functools.cached_property
    def _plan(self) -> tuple[tuple[str | None, Any, Callable[[Any], Any] | None], ...]:
        """Per placeholder: the row's column (or None), the constant, the column's processor."""
        return tuple(
            (column, constant, None if column is None else self.processors.get(column))
            for column, constant in zip(self.slots, self.constants, strict=True)
        )


@functools.cache
def _template(
    dialect: Dialect,
    table: Table,
    columns: tuple[str, ...],
    *,
    stamped: tuple[str, ...],
    fixed: Fixed,
    ignore_duplicates: bool,
    accumulate: tuple[str, ...] = (),
    replace: tuple[str, ...] = (),
    after_last_insert_id: tuple[str, ...] = (),
) -> _Template:
    values = {
        **{c: bindparam(f"row_{c}", None, type_=table.c[c].type) for c in columns},
        **{
            c: func.last_insert_id() + bindparam(f"row_{c}", None, type_=table.c[c].type)
            for c in after_last_insert_id
        },
        **{c: db_now() for c in stamped},
        **dict(fixed),
    }
    statement = _statement(
        dialect,
        table,
        values,
        ignore_duplicates=ignore_duplicates,
        accumulate=accumulate,
        replace=replace,
    )
    compiled: Any = statement.compile(dialect=dialect)
    if not compiled.positional:
        raise NotImplementedError(f"{dialect.name}: multi-row inserts need a positional driver")
    sql: str = compiled.string
    start = sql.index(" VALUES ") + len(" VALUES ")
    end = _closing(sql, start)
    params = compiled.construct_params(escape_names=False)
    row_binds = {f"row_{c}": c for c in columns}
    slots = tuple(row_binds.get(name) for name in compiled.positiontup)
    constants = tuple(
        None if name in row_binds else _processed(compiled, name, params[name])
        for name in compiled.positiontup
    )
    processors = {
        c: process
        for c in columns
        if (process := table.c[c].type.dialect_impl(dialect).bind_processor(dialect)) is not None
    }
    return _Template(
        sql[:start], sql[start : end + 1], sql[end + 1 :], slots, constants, processors
    )


def _statement(
    dialect: Dialect,
    table: Table,
    values: Mapping[str, Any],
    *,
    ignore_duplicates: bool,
    accumulate: tuple[str, ...],
    replace: tuple[str, ...],
) -> Any:
    if not (ignore_duplicates or accumulate or replace):
        return insert(table).values(values)
    primary = list(table.primary_key.columns)
    if dialect.name == "sqlite":
        lite = sqlite_insert(table).values(values)
        if not (accumulate or replace):
            return lite.on_conflict_do_nothing()
        return lite.on_conflict_do_update(
            index_elements=primary,
            set_={
                **{c: table.c[c] + lite.excluded[c] for c in accumulate},
                **{c: lite.excluded[c] for c in replace},
            },
        )
    upsert = mysql_insert(table).values(values)
    if not (accumulate or replace):
        return upsert.on_duplicate_key_update({primary[0].name: upsert.inserted[primary[0].name]})
    return upsert.on_duplicate_key_update(
        {
            **{c: table.c[c] + upsert.inserted[c] for c in accumulate},
            **{c: upsert.inserted[c] for c in replace},
        }
    )


def _closing(sql: str, start: int) -> int:
    """Where the parenthesised tuple that opens at ``start`` closes."""
    depth = 0
    for index in range(start, len(sql)):
        if sql[index] == "(":
            depth += 1
        elif sql[index] == ")":
            depth -= 1
            if depth == 0:
                return index
    raise ValueError("unbalanced VALUES tuple")


def _processed(compiled: Any, name: str, value: Any) -> Any:
    process = compiled._bind_processors.get(name)
    return value if process is None else process(value)


def batch_bucket(rows: int) -> int:
    """The row count a multi-row statement for ``rows`` rows is compiled for: the next power of
    two. Compiling a CASE-per-row UPDATE costs tens of milliseconds for a large batch; padding the
    batch (repeating its last row) keeps the compiled forms few and cached."""
    return 1 << max(rows - 1, 0).bit_length()

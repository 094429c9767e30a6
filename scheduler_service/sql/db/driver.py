"""Statements sent straight to asyncmy: SQLAlchemy's rendering, without its per-call machinery.

SQLAlchemy's asyncio layer runs every ``execute`` in a fresh greenlet (Python 3.11 maps and
unmaps a frame stack for each one) around an execution context that looks the statement up
in its compiled cache by a key it rebuilds per call, constructs the parameters, renders
expanding ``IN`` lists and wraps the cursor. ``bench/statement_cost.py`` measures one statement
on each path: about twice the bare cursor's CPU through ``AsyncConnection.execute``, a fifth
more than it here; over a drain that is about a ninth of the scheduler's CPU per job
(docs/performance.md, "What the hot path does, and where").

:class:`DriverConnection` is the engine's connection class on MySQL/MariaDB. A Core statement
it is handed a second time (module constants and cached builders; a statement built afresh per
call never repeats and keeps SQLAlchemy's path) is planned once, from what SQLAlchemy compiled
for it the first time: its SQL per ``IN`` list sizes, its parameters laid out positionally with
the bind processors, the result columns' processors. It is sent on the pooled connection's own
asyncmy cursor under the adapter's mutex. What the plan does not cover goes SQLAlchemy's way:
lists of parameter sets, execution options, INSERTs (their Python-side defaults and primary
keys), statements with prefetched defaults, literal-execute or escaped bind names, empty ``IN``
lists, a connection that is closed, invalidated or in a failed or nested transaction.

The parts that make SQLAlchemy's path safe stay: ``before_cursor_execute`` listeners see every
statement (tests count statements and guard who writes ``lifecycleStatus``), a statement outside
a transaction begins one as SQLAlchemy's autobegin would, and a driver error goes through the
connection's own handling, which wraps it in SQLAlchemy's exception classes and invalidates a
connection lost or interrupted mid-statement.

**Queued writes** (:func:`write_later`, :func:`write_sql_later`). A write whose reply is only
its count (a guarded UPDATE whose count is checked, a multi-row INSERT) need not cost a round
trip of its own: it is queued on the connection and sent with the transaction's next statement,
all of them in one multi-statement query (asyncmy connects with CLIENT_MULTI_STATEMENTS), each
reply read in turn and each count checked against what its writer expected, before the
statement's own answer is used. The queue is sent before any statement that goes SQLAlchemy's
way and before the transaction commits, whatever path commits it; a rollback drops it. The server
stops at the first statement that fails, and the error is raised there as SQLAlchemy would raise
it, with the statements' templates and never the values written into them. A failed write or
check fails its transaction as it would have failed at the write: only the line that raises is
later. Listeners are told of each queued write when it is queued, from its writer's stack.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Delete, Select, TextClause, Update
from sqlalchemy.engine import CursorResult, Dialect
from sqlalchemy.engine.result import IteratorResult, SimpleResultMetaData
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from scheduler_service.sql.db import round_trips
from scheduler_service.sql.db.round_trips import Statement

__all__ = [
    "DriverConnection",
    "DriverEngine",
    "commit_with_queued",
    "send_queued",
    "write_later",
    "write_sql_later",
]

_SENT_THROUGH_THE_DRIVER = (Select, Update, Delete, TextClause)
_MISSING = object()
#: Most ``IN`` list size combinations a plan keeps rendered (batches are bounded, so the common
#: ones are few; past this a statement is rendered per call).
MAX_RENDERED = 256


class DriverResult(IteratorResult[Any]):
    """Rows already fetched, with the matched-row count of an UPDATE or DELETE."""

    def __init__(self, keys: Sequence[str], rows: Sequence[Any], rowcount: int) -> None:
        super().__init__(SimpleResultMetaData(keys), iter(rows))
        self.rowcount = rowcount


@dataclass(frozen=True)
class _Slot:
    """One placeholder of the compiled statement: where its value comes from."""

    key: str
    default: Any
    required: bool
    expanding: bool
    process: Callable[[Any], Any] | None


@dataclass
class _Plan:
    """A statement compiled once for a dialect: its SQL per ``IN`` list sizes, its slots, its
    result columns."""

    sql: str
    slots: tuple[_Slot, ...]
    expanding: tuple[str, ...]
    keys: tuple[str, ...]
    result_types: tuple[Any, ...]
    rendered: dict[tuple[int, ...], str]
    #: The result columns that need processing, by position; None until the first reply.
    processors: tuple[tuple[int, Callable[[Any], Any]], ...] | None = None

    def sql_for(self, sizes: tuple[int, ...]) -> str:
        sql = self.rendered.get(sizes)
        if sql is None:
            sql = self.sql
            for name, size in zip(self.expanding, sizes, strict=True):
                sql = sql.replace(f"__[POSTCOMPILE_{name}]", ", ".join(["%s"] * size))
            if len(self.rendered) < MAX_RENDERED:
                self.rendered[sizes] = sql
        return sql

    def parameters(self, given: Mapping[str, Any]) -> tuple[list[Any], tuple[int, ...]] | None:
        """The positional values, and the ``IN`` lists' sizes; None for an empty list."""
        values: list[Any] = []
        sizes: list[int] = []
        for slot in self.slots:
            value = given.get(slot.key, _MISSING)
            if value is _MISSING:
                if slot.required:
                    return None
                value = slot.default() if callable(slot.default) else slot.default
            process = slot.process
            if slot.expanding:
                if not value:
                    return None
                sizes.append(len(value))
                values.extend(value if process is None else [process(v) for v in value])
            else:
                values.append(value if process is None else process(value))
        return values, tuple(sizes)


#: Per statement, its plans by the names its parameters come with (an UPDATE sets the columns
#: its parameters name, as SQLAlchemy compiles it per ``column_keys``): a plan, _UNCOVERED, or,
#: after the first sighting, a weak reference to what SQLAlchemy compiled for it then (the next
#: sighting makes the plan from it, without compiling twice). Weak: a statement built for one
#: call goes with it.
_SEEN: weakref.WeakKeyDictionary[Any, dict[frozenset[str] | None, Any]] = (
    weakref.WeakKeyDictionary()
)
_UNCOVERED = "not covered"


def _plans_of(statement: Any) -> dict[frozenset[str] | None, Any] | None:
    try:
        plans = _SEEN.get(statement)
        if plans is None:
            plans = _SEEN[statement] = {}
    except TypeError:
        return None
    return plans


def _names(statement: Any, parameters: Any) -> frozenset[str] | None:
    return frozenset(parameters) if isinstance(statement, Update) and parameters else None


def _plan_for(dialect: Dialect, statement: Any, names: frozenset[str] | None, seen: Any) -> Any:
    """The plan for ``statement``, from what SQLAlchemy compiled at its first sighting if that
    is still cached, else compiled here; _UNCOVERED if the plan does not cover it."""
    compiled: Any = seen() if isinstance(seen, weakref.ref) else None
    if compiled is None:
        compiled = statement.compile(
            dialect=dialect, column_keys=sorted(names) if names is not None else None
        )
    return _plan_from(compiled) or _UNCOVERED


def _plan_from(compiled: Any) -> _Plan | None:
    if (
        not compiled.positional
        or compiled.literal_execute_params
        or compiled.escaped_bind_names
        or getattr(compiled, "insert_prefetch", None)
        or getattr(compiled, "update_prefetch", None)
    ):
        return None
    expanding_names = {compiled.bind_names[b] for b in compiled.post_compile_params}
    processors = compiled._bind_processors
    slots = []
    for name in compiled.positiontup:
        bind = compiled.binds[name]
        if bind.expanding and name not in expanding_names:
            return None
        if bind.expanding and getattr(bind.type, "_is_tuple_type", False):
            return None
        default = bind.callable if bind.callable is not None else bind.value
        slots.append(_Slot(bind.key, default, bind.required, bind.expanding, processors.get(name)))
    # A name used twice (one list in two places) renders the same size in both.
    expanding = tuple(
        name for name, slot in zip(compiled.positiontup, slots, strict=True) if slot.expanding
    )
    columns = compiled._result_columns or []
    return _Plan(
        sql=compiled.string,
        slots=tuple(slots),
        expanding=expanding,
        keys=tuple(entry.keyname for entry in columns),
        result_types=tuple(entry.type for entry in columns),
        rendered={},
    )


class DriverConnection(AsyncConnection):
    """An AsyncConnection whose repeated Core statements go straight to asyncmy."""

    async def execute(
        self,
        statement: Any,
        parameters: Any = None,
        *,
        execution_options: Any = None,
    ) -> CursorResult[Any]:
        plans = self._plans(statement, parameters, execution_options)
        names = _names(statement, parameters) if plans is not None else None
        planned = self._planned(plans, names, statement, parameters)
        if planned is not None:
            plan, sql, values = planned
            return cast(CursorResult[Any], await self._send(plan, sql, values))
        answer: CursorResult[Any] = await super().execute(
            statement, parameters, execution_options=execution_options
        )
        if plans is not None and names not in plans:
            compiled = getattr(getattr(answer, "context", None), "compiled", None)
            plans[names] = weakref.ref(compiled) if compiled is not None else _UNCOVERED
        return answer

    def _planned(
        self,
        plans: dict[frozenset[str] | None, Any] | None,
        names: frozenset[str] | None,
        statement: Any,
        parameters: Any,
    ) -> tuple[_Plan, str, list[Any]] | None:
        """The statement's plan, SQL and positional values, if it may go straight to the
        driver now."""
        if plans is None or names not in plans:
            return None
        plan = plans[names]
        if not isinstance(plan, _Plan) and plan is not _UNCOVERED:
            plan = plans[names] = _plan_for(self.dialect, statement, names, plan)
        if not isinstance(plan, _Plan) or not self._ready():
            return None
        laid_out = plan.parameters(parameters or {})
        if laid_out is None:
            return None
        values, sizes = laid_out
        return plan, plan.sql_for(sizes), values

    def write_later(self, statement: Any, parameters: Any, expect: int | None, what: str) -> bool:
        """Queue a write whose reply is only its count, to be sent in the round trip of this
        transaction's next statement (or its commit); False, with nothing queued, when the
        statement cannot go straight to the driver now (the caller sends it at once)."""
        plans = self._plans(statement, parameters, None)
        planned = self._planned(plans, _names(statement, parameters), statement, parameters)
        if planned is None:
            return False
        _, sql, values = planned
        round_trips.queue(self.sync_connection, Statement(sql, values, expect, what))
        return True

    def write_sql_later(self, sql: str, values: tuple[Any, ...]) -> bool:
        """:meth:`write_later` for SQL written out (``exec_driver_sql``'s)."""
        if not self._ready():
            return False
        round_trips.queue(self.sync_connection, Statement(sql, list(values), None))
        return True

    async def flush(self) -> None:
        """Send the queued writes now, in one round trip, and check their counts."""
        sync = self.sync_connection
        if sync is not None and round_trips.is_queued(sync):
            await round_trips.send_queue(sync)

    async def exec_driver_sql(
        self,
        statement: str,
        parameters: Any = None,
        execution_options: Any = None,
    ) -> CursorResult[Any]:
        if execution_options or not isinstance(parameters, tuple) or not self._ready():
            return await super().exec_driver_sql(statement, parameters, execution_options)
        return cast(CursorResult[Any], await self._send(None, statement, list(parameters)))

    def _plans(
        self, statement: Any, parameters: Any, execution_options: Any
    ) -> dict[frozenset[str] | None, Any] | None:
        if execution_options or not isinstance(statement, _SENT_THROUGH_THE_DRIVER):
            return None
        if parameters is not None and not isinstance(parameters, Mapping):
            return None
        if statement._execution_options:
            return None
        return _plans_of(statement)

    def _ready(self) -> bool:
        """Whether a statement may go straight to the driver: the connection is open, and in a
        transaction that can run it (begun here if none is, as SQLAlchemy autobegins). Anything
        else goes SQLAlchemy's way, which raises what it raises."""
        sync: Any = self.sync_connection
        if sync is None or sync.closed or sync.invalidated or sync._nested_transaction:
            return False
        transaction = sync._transaction
        if transaction is None:
            sync._autobegin()
            return sync._transaction is not None
        return bool(transaction.is_active)

    async def _send(self, plan: _Plan | None, sql: str, values: list[Any]) -> DriverResult:
        sync: Any = self.sync_connection
        queued = round_trips.take_queue(sync)
        statement = Statement(sql, values, None)
        round_trips.tell_listeners(sync, statement)
        replies = await round_trips.round_trip(sync, [*queued, statement])
        round_trips.check_counts(queued, replies)
        described, rows, rowcount = replies[-1]
        if plan is None or (described and len(plan.keys) != len(described)):
            # Raw SQL, or text() whose columns SQLAlchemy does not know: the cursor's names.
            keys: Sequence[str] = [d[0] for d in described] if described else ()
            return DriverResult(keys, rows, rowcount)
        processors = plan.processors
        if processors is None and described:
            found = [
                type_._cached_result_processor(self.dialect, d[1])
                for type_, d in zip(plan.result_types, described, strict=True)
            ]
            # Only the columns that need one: most rows go out as the driver read them.
            processors = plan.processors = tuple(
                (index, process) for index, process in enumerate(found) if process is not None
            )
        if processors:
            rows = [_processed(row, processors) for row in rows]
        return DriverResult(plan.keys, rows, rowcount)


def _processed(row: Any, processors: tuple[tuple[int, Callable[[Any], Any]], ...]) -> list[Any]:
    values = list(row)
    for index, process in processors:
        values[index] = process(values[index])
    return values


class DriverEngine(AsyncEngine):
    """An AsyncEngine whose connections are :class:`DriverConnection`."""

    __slots__ = ()
    _connection_cls = DriverConnection


async def write_later(
    conn: AsyncConnection,
    statement: Any,
    parameters: Mapping[str, Any],
    *,
    expect: int | None = None,
    what: str = "write",
) -> None:
    """A write whose reply is only its count: on a driver connection, sent with the next
    statement of the transaction (or with its commit), its count checked against ``expect``
    then; elsewhere sent now and checked now. A failure, or a count other than ``expect``
    (RuntimeError naming ``what``), surfaces at that later statement and fails the
    transaction, as it would have here."""
    if isinstance(conn, DriverConnection) and conn.write_later(statement, parameters, expect, what):
        return
    result = await conn.execute(statement, parameters)
    round_trips.check_count(result.rowcount, expect, what)


async def write_sql_later(conn: AsyncConnection, sql: str, values: tuple[Any, ...]) -> None:
    """:func:`write_later` for SQL written out, whose reply is only that it did not fail."""
    if isinstance(conn, DriverConnection) and conn.write_sql_later(sql, values):
        return
    await conn.exec_driver_sql(sql, values)


async def send_queued(conn: AsyncConnection) -> None:
    """Send the writes queued on ``conn`` now (their failures surface here)."""
    if isinstance(conn, DriverConnection):
        await conn.flush()


async def commit_with_queued(conn: AsyncConnection) -> None:
    """Send the writes queued on ``conn`` with its transaction's COMMIT, in one round trip
    (their failures surface here, and the transaction is then not committed); the COMMIT that
    ends ``conn.begin()`` is then not sent again. Nothing queued: nothing is sent here."""
    if isinstance(conn, DriverConnection):
        await round_trips.commit_with_queue(conn.sync_connection)

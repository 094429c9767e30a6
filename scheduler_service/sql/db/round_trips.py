"""Round trips to asyncmy for the driver's path (scheduler_service/sql/db/driver.py): one or several
statements sent at once, and the writes queued on a connection for its transaction's next round
trip (the driver module's docstring, *Queued writes*)."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import await_only, greenlet_spawn

__all__ = [
    "Reply",
    "Statement",
    "check_count",
    "check_counts",
    "commit_with_queue",
    "committed_here",
    "is_queued",
    "queue",
    "raise_as_sqlalchemy",
    "round_trip",
    "send_queue",
    "take_queue",
    "tell_listeners",
    "watch_commits",
]


@dataclass(frozen=True)
class Statement:
    """A statement to send: its SQL (placeholders ``%s``), its values, and for a queued write
    the count it must match (``expect``; None: any), named ``what`` in the error if it does
    not."""

    sql: str
    values: list[Any]
    expect: int | None = None
    what: str = "write"

    def check(self, matched: int) -> None:
        check_count(matched, self.expect, self.what)


def check_count(matched: int, expect: int | None, what: str) -> None:
    """A write's count against the one expected (None: any)."""
    if expect is not None and matched != expect:
        # Every checked write is judged on rows its transaction holds locked: a bug.
        raise RuntimeError(f"{what}: {matched} rows matched, {expect} expected")


#: Fails its statement (error 1242, a scalar subquery of two rows) when the statement before it
#: did not match the count given. It stands for a checked write's count check in a round trip
#: that ends with COMMIT: the server stops there and the COMMIT never runs. ``DO`` would not do,
#: MariaDB turns its errors into warnings.
_GUARD = Statement(
    "SELECT (SELECT 1 FROM (SELECT 1 UNION ALL SELECT 2) AS g WHERE ROW_COUNT() <> %s)", []
)
_COMMIT = Statement("COMMIT", [])


#: Per connection in a transaction, the writes queued for its next round trip. Keyed by the
#: sync connection, which lives as long as one checkout: nothing queued outlives it.
_QUEUED: weakref.WeakKeyDictionary[Any, list[Statement]] = weakref.WeakKeyDictionary()

Reply = tuple[Any, Sequence[Any], int]


def tell_listeners(sync: Any, statement: Statement) -> None:
    """``before_cursor_execute`` for a statement of the driver's path, from its caller's stack
    (a queued write is told when it is queued: tests check who writes what by the stack). The
    cursor is None, which is how :func:`_send_queued_first` knows the statement is ours."""
    if sync._has_events or sync.engine._has_events:
        sql, values = statement.sql, statement.values
        sync.dispatch.before_cursor_execute(sync, None, sql, values, None, False)


def queue(sync: Any, statement: Statement) -> None:
    tell_listeners(sync, statement)
    _QUEUED.setdefault(sync, []).append(statement)


async def round_trip(
    sync: Any, statements: Sequence[Statement], replies: list[Reply] | None = None
) -> list[Reply]:
    """Send ``statements`` in one round trip (a multi-statement query when they are several:
    asyncmy always connects with CLIENT_MULTI_STATEMENTS) and read each one's reply: its
    description, rows and count, into ``replies``. The server stops at a statement that fails,
    and the error is raised as SQLAlchemy raises it: none of the statements after it ran, and
    ``replies`` holds those before it."""
    adapted = sync.connection.dbapi_connection
    replies = [] if replies is None else replies
    try:
        async with adapted._execute_mutex:
            cursor = adapted._connection.cursor()
            if len(statements) == 1:
                await cursor.execute(statements[0].sql, statements[0].values)
            else:
                await cursor.execute(
                    ";\n".join(cursor.mogrify(s.sql, s.values) for s in statements)
                )
            while True:
                described = cursor.description
                rows = await cursor.fetchall() if described else ()
                replies.append((described, rows, cursor.rowcount))
                if len(replies) == len(statements) or not await cursor.nextset():
                    break
            await cursor.close()
    except BaseException as exc:
        # The templates, never the values written into them: job content stays out of errors.
        sql = ";\n".join(s.sql for s in statements)
        values = [v for s in statements for v in s.values]
        await greenlet_spawn(raise_as_sqlalchemy, sync, exc, sql, values)
        raise
    return replies


def check_counts(queued: Sequence[Statement], replies: Sequence[Reply]) -> None:
    """Each queued write's check on its count, once every reply of the round trip is read."""
    for statement, (_, _, rowcount) in zip(queued, replies, strict=False):
        statement.check(rowcount)


async def commit_with_queue(sync: Any) -> bool:
    """Send the queued writes and COMMIT in one round trip, each checked write followed by its
    guard (the server stops at a count that does not match, before the COMMIT). False, with
    nothing sent, when nothing is queued: the transaction commits as usual. After True the
    dialect's own COMMIT is skipped (:func:`committed_here`)."""
    queued = _QUEUED.pop(sync, ())
    if not queued:
        return False
    statements: list[Statement] = []
    for statement in queued:
        statements.append(statement)
        if statement.expect is not None:
            statements.append(Statement(_GUARD.sql, [statement.expect]))
    replies: list[Reply] = []
    try:
        await round_trip(sync, [*statements, _COMMIT], replies)
    except BaseException:
        # A guard that stopped the round trip: its write's own error, from the count read.
        writes = [
            reply for reply, s in zip(replies, statements, strict=False) if s.sql != _GUARD.sql
        ]
        check_counts([s for s in statements if s.sql != _GUARD.sql], writes)
        raise
    _COMMITTED_HERE[sync.connection] = True
    return True


#: Pooled connections (per checkout) whose transaction :func:`commit_with_queue` committed.
_COMMITTED_HERE: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def committed_here(pooled: Any) -> bool:
    """Whether the COMMIT the dialect is about to send was sent already (once: the flag goes)."""
    return _COMMITTED_HERE.pop(pooled, False)


async def send_queue(sync: Any) -> None:
    queued = _QUEUED.pop(sync, ())
    if queued:
        check_counts(queued, await round_trip(sync, queued))


def _send_queued_before_commit(sync: Any) -> None:
    """Before the transaction commits, whatever path commits it, the writes queued on its
    connection are sent (SQLAlchemy calls this in the greenlet that commits, where the round
    trip can be awaited)."""
    if sync in _QUEUED:
        await_only(send_queue(sync))


def _send_queued_first(sync: Any, cursor: Any, *_: Any) -> None:
    """The same before a statement that goes SQLAlchemy's way; the driver's own statements
    (no cursor) carry the queue in their round trip."""
    if cursor is not None:
        _send_queued_before_commit(sync)


def _drop_queued(sync: Any) -> None:
    """On a rollback: the queue goes, and so does a COMMIT marked as sent (a task cancelled
    between the round trip and SQLAlchemy's commit): the skip never outlives its transaction."""
    _QUEUED.pop(sync, None)
    pooled = sync.connection if not sync.closed and not sync.invalidated else None
    if pooled is not None:
        _COMMITTED_HERE.pop(pooled, None)


def watch_commits(engine: AsyncEngine) -> None:
    """Queued writes are sent before any statement that goes SQLAlchemy's way and before their
    transaction commits; they are dropped when it rolls back. A COMMIT that went with the queue
    is not sent again."""
    event.listen(engine.sync_engine, "before_cursor_execute", _send_queued_first)
    event.listen(engine.sync_engine, "commit", _send_queued_before_commit)
    dialect: Any = engine.sync_engine.dialect
    plain_commit = dialect.do_commit

    def do_commit(pooled: Any) -> None:
        if not committed_here(pooled):
            plain_commit(pooled)

    dialect.do_commit = do_commit
    event.listen(engine.sync_engine, "rollback", _drop_queued)


def raise_as_sqlalchemy(sync: Any, exc: BaseException, sql: str, values: list[Any]) -> None:
    """SQLAlchemy's own handling of a driver error: its exception classes, and the connection
    invalidated when it was lost or interrupted mid-statement (a cancelled task)."""
    if isinstance(exc, AttributeError):
        # asyncmy's answer to a socket closed under it (as SQLAlchemy's adapter reads it).
        dbapi = sync.dialect.loaded_dbapi
        exc = dbapi.InternalError("network operation failed due to asyncmy attribute error")
    try:
        # Raised again here: the handler reads the exception being handled (sys.exc_info),
        # which a fresh greenlet does not carry over.
        raise exc
    except BaseException as handled:
        sync._handle_dbapi_exception(handled, sql, values, None, None)


def take_queue(sync: Any) -> list[Statement]:
    """The writes queued on ``sync``, taken off its queue."""
    return _QUEUED.pop(sync, [])


def is_queued(sync: Any) -> bool:
    return sync in _QUEUED

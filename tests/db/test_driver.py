"""Statements sent straight to asyncmy (scheduler_service/sql/db/driver.py), on MariaDB: the same
rows, counts and errors as SQLAlchemy's own path, every statement seen by the engine's
listeners, and a connection lost or interrupted mid-statement never handed out again."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from sqlalchemy import (
    Select,
    Table,
    TextClause,
    Update,
    bindparam,
    event,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from devtools.harness.waiting import eventually
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.driver import DriverConnection, DriverEngine
from scheduler_service.sql.db.models import OutboxEvent
from scheduler_service.sql.db.multirow import insert_rows

pytestmark = pytest.mark.mysql

OUTBOX = cast(Table, OutboxEvent.__table__)
_o = OUTBOX.c

# Built afresh for each test (a statement's first sighting takes SQLAlchemy's path, the next
# ones the driver; a module constant would carry that from one test to another), then executed
# several times within it, as the services' module constants are.


def by_ids() -> Select[Any]:
    return select(
        _o.id, _o.aggregateId, _o.payload, _o.createdAt, func.count().over().label("total")
    ).where(_o.aggregateId.in_(bindparam("b_ids", expanding=True)), _o.status == "pending")


def mark() -> Update:
    return update(OUTBOX).where(_o.aggregateId.in_(bindparam("b_ids", expanding=True)))


def twice() -> Select[Any]:
    """One list in two places."""
    return select(_o.aggregateId).where(
        _o.aggregateId.in_(bindparam("b_ids", expanding=True)),
        _o.dedupeKey.in_(select(_o.dedupeKey).where(_o.aggregateId.in_(bindparam("b_ids")))),
    )


def probe() -> TextClause:
    return text("SELECT :b_value AS echoed, 'x' LIKE '%' AS matched")


@pytest.fixture
async def plain(mysql_engine: AsyncEngine) -> AsyncIterator[AsyncEngine]:
    """SQLAlchemy's own path on the same database, for comparison."""
    eng = create_async_engine(mysql_engine.url, hide_parameters=True)
    yield eng
    await eng.dispose()


async def _events(conn: AsyncConnection, count: int) -> None:
    rows = [
        {
            "eventType": "ai.job.enqueue",
            "aggregateId": f"job-{i}",
            "dedupeKey": f"enqueue:job-{i}",
            "payload": {"n": i, "text": "ü"},
        }
        for i in range(count)
    ]
    fixed = {"aggregateType": "AiJob", "status": "pending", "attemptCount": 0}
    await insert_rows(conn, OUTBOX, rows, stamped=("availableAt", "createdAt"), fixed=fixed)


def _fallbacks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements that took SQLAlchemy's path, as they are executed."""
    fallbacks: list[str] = []
    original = AsyncConnection.execute

    async def counted(self: AsyncConnection, statement: Any, *args: Any, **kw: Any) -> Any:
        fallbacks.append(str(statement)[:40])
        return await original(self, statement, *args, **kw)

    monkeypatch.setattr(AsyncConnection, "execute", counted)
    return fallbacks


async def test_the_engine_hands_out_driver_connections(mysql_engine: AsyncEngine) -> None:
    assert isinstance(mysql_engine, DriverEngine)
    async with mysql_engine.connect() as conn:
        assert isinstance(conn, DriverConnection)


async def test_repeated_selects_answer_what_sqlalchemy_answers(
    mysql_engine: AsyncEngine, plain: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with mysql_engine.begin() as conn:
        await _events(conn, 5)
    fallbacks = _fallbacks(monkeypatch)
    ids = {"b_ids": ["job-1", "job-3", "job-4", "nobody"]}
    statement = by_ids()
    async with mysql_engine.connect() as conn:
        answers = [(await conn.execute(statement, ids)).all() for _ in range(3)]
    assert len(fallbacks) == 1, "only the first sighting goes SQLAlchemy's way"
    async with plain.connect() as conn:
        expected = (await conn.execute(by_ids(), ids)).all()
    assert answers[0] == answers[1] == answers[2] == expected
    row = sorted(answers[2], key=lambda r: r.aggregateId)[0]
    assert row.payload == {"n": 1, "text": "ü"}, "JSON columns are decoded"
    assert row._mapping["total"] == 3 and row.createdAt is not None


async def test_one_list_used_twice(
    mysql_engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with mysql_engine.begin() as conn:
        await _events(conn, 4)
    fallbacks = _fallbacks(monkeypatch)
    statement = twice()
    async with mysql_engine.connect() as conn:
        answers = [
            sorted((await conn.execute(statement, {"b_ids": ids})).scalars())
            for ids in (["job-0"], ["job-1", "job-2", "x"], ["job-3", "job-0"])
        ]
    assert len(fallbacks) == 1
    assert answers == [["job-0"], ["job-1", "job-2"], ["job-0", "job-3"]]


async def test_text_with_a_percent_sign_and_a_named_value(mysql_engine: AsyncEngine) -> None:
    statement = probe()
    async with mysql_engine.connect() as conn:
        found = [(await conn.execute(statement, {"b_value": "50%"})).one() for _ in range(2)]
    assert found[0] == found[1] == ("50%", 1)
    assert found[1].echoed == "50%"


async def test_updates_count_matched_rows_and_set_the_columns_their_parameters_name(
    mysql_engine: AsyncEngine,
) -> None:
    async with mysql_engine.begin() as conn:
        await _events(conn, 3)
    statement = mark()
    for _ in range(3):
        async with mysql_engine.begin() as conn:
            # The same values each time: MySQL's changed-row count would be 0 the second time.
            result = await conn.execute(statement, {"b_ids": ["job-0", "job-2"], "lockedBy": "me"})
            assert result.rowcount == 2
    async with mysql_engine.connect() as conn:
        locked = dict((await conn.execute(select(_o.aggregateId, _o.lockedBy))).all())
    assert locked == {"job-0": "me", "job-1": None, "job-2": "me"}


async def test_an_empty_in_list_takes_sqlalchemys_path(mysql_engine: AsyncEngine) -> None:
    statement = by_ids()
    async with mysql_engine.connect() as conn:
        for _ in range(3):
            assert (await conn.execute(statement, {"b_ids": []})).all() == []


async def test_a_statement_without_a_transaction_begins_one_that_commit_ends(
    mysql_engine: AsyncEngine,
) -> None:
    async with mysql_engine.begin() as conn:
        await _events(conn, 1)
    statement = mark()
    for owner in ("a", "b"):
        async with mysql_engine.connect() as conn:
            await conn.execute(statement, {"b_ids": ["job-0"], "lockedBy": owner})
            await conn.commit()
    async with mysql_engine.connect() as conn:
        assert (await conn.execute(select(_o.lockedBy))).scalar_one() == "b"


async def test_every_statement_reaches_the_engines_listeners(mysql_engine: AsyncEngine) -> None:
    sent: list[str] = []
    event.listen(mysql_engine.sync_engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    statement = by_ids()
    async with mysql_engine.connect() as conn:
        for _ in range(3):
            await conn.execute(statement, {"b_ids": ["a", "b"]})
    assert len(sent) == 3
    assert sent[2].count("%s") == 3, "the IN list rendered for its two values"


async def test_driver_errors_are_sqlalchemys_errors(mysql_engine: AsyncEngine) -> None:
    async with mysql_engine.begin() as conn:
        await _events(conn, 1)
    duplicate = insert(OUTBOX).values(
        eventType="x", aggregateType="AiJob", aggregateId="j", dedupeKey="enqueue:job-0",
        payload={}, status="pending", attemptCount=0, availableAt=db_now(), createdAt=db_now(),
    )  # fmt: skip
    wrong = text("SELECT nothing FROM OutboxEvent")
    for _ in range(2):
        with pytest.raises(IntegrityError):
            async with mysql_engine.begin() as conn:
                await conn.exec_driver_sql(
                    "INSERT INTO OutboxEvent (eventType, aggregateType, aggregateId, dedupeKey,"
                    " payload, status, attemptCount, availableAt, createdAt) VALUES"
                    " ('x', 'AiJob', 'j', %s, '{}', 'pending', 0, NOW(), NOW())",
                    ("enqueue:job-0",),
                )
        with pytest.raises(OperationalError):
            async with mysql_engine.connect() as conn:
                await conn.execute(wrong)
    with pytest.raises(IntegrityError):
        async with mysql_engine.begin() as conn:
            await conn.execute(duplicate)


async def _connection_id(conn: AsyncConnection) -> int:
    return int((await conn.execute(text("SELECT CONNECTION_ID()"))).scalar_one())


async def test_a_connection_killed_under_a_statement_is_invalidated(
    mysql_engine: AsyncEngine, plain: AsyncEngine
) -> None:
    probe = select(func.count()).select_from(OUTBOX)
    async with mysql_engine.connect() as conn:
        await conn.execute(probe)
        await conn.execute(probe)
        async with plain.connect() as killer:
            await killer.execute(text(f"KILL CONNECTION {await _connection_id(conn)}"))
        with pytest.raises(DBAPIError) as caught:
            await conn.execute(probe)
        assert caught.value.connection_invalidated
    async with mysql_engine.connect() as conn:
        assert (await conn.execute(probe)).scalar_one() == 0


async def test_a_cancelled_statement_leaves_no_connection_mid_reply(
    mysql_engine: AsyncEngine, plain: AsyncEngine
) -> None:
    sleep = text(f"SELECT /* {uuid.uuid4().hex} */ SLEEP(:b_s)")
    sleeping: list[int] = []

    async def sleeper() -> None:
        async with mysql_engine.connect() as conn:
            sleeping.append(await _connection_id(conn))
            await conn.execute(sleep, {"b_s": 0})  # the first sighting: SQLAlchemy's path
            await conn.execute(sleep, {"b_s": 30})  # the driver's, cancelled mid-reply

    task = asyncio.create_task(sleeper())
    async with plain.connect() as watcher:
        await eventually(lambda: _sleeping(watcher, sleeping), every_s=0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The pool hands out its most recently returned connection first: had the interrupted one
    # gone back, this would be it, with a SLEEP's reply still to read.
    async with mysql_engine.connect() as conn:
        assert await _connection_id(conn) != sleeping[0]
        assert (await conn.execute(text("SELECT 7"))).scalar_one() == 7


async def _sleeping(watcher: AsyncConnection, ids: list[int]) -> bool:
    if not ids:
        return False
    found = await watcher.execute(
        text("SELECT INFO FROM information_schema.PROCESSLIST WHERE ID = :b_id"), {"b_id": ids[0]}
    )
    info = found.scalar_one_or_none()
    return info is not None and "SLEEP(30)" in info

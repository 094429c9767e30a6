"""Writes queued for the transaction's next round trip (scheduler_service/sql/db/driver.py
``write_later``), on MariaDB: they go with the next statement in one multi-statement round trip,
before a commit whatever path commits, before a statement that takes SQLAlchemy's way; a failed
write or count check fails the transaction with nothing of it written; a rollback drops them;
every one is told to the engine's listeners from its writer's stack; errors carry no values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest
from sqlalchemy import Table, bindparam, event, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from scheduler_service.sql.db import round_trips
from scheduler_service.sql.db.driver import commit_with_queued, send_queued, write_later
from scheduler_service.sql.db.models import OutboxEvent
from scheduler_service.sql.db.multirow import insert_rows

pytestmark = pytest.mark.mysql

OUTBOX = cast(Table, OutboxEvent.__table__)
_o = OUTBOX.c
_FIXED = {"aggregateType": "AiJob", "status": "pending", "attemptCount": 0}
_STAMPED = ("availableAt", "createdAt")
#: Module constants, as the services' statements are: the second sighting goes to the driver.
_LOCK = update(OUTBOX).where(_o.aggregateId == bindparam("b_id")).values(lockedBy="me")
_COUNT = select(func.count()).select_from(OUTBOX)
_LOCKED = select(_o.aggregateId).where(_o.lockedBy == "me").order_by(_o.aggregateId)


def _rows(*ids: str, secret: str = "") -> list[dict[str, Any]]:
    return [
        {
            "eventType": "ai.job.enqueue",
            "aggregateId": job,
            "dedupeKey": f"enqueue:{job}",
            "payload": {"job": job, "note": secret},
        }
        for job in ids
    ]


async def _queue_events(conn: AsyncConnection, *ids: str, secret: str = "") -> None:
    rows = _rows(*ids, secret=secret)
    await insert_rows(conn, OUTBOX, rows, stamped=_STAMPED, fixed=_FIXED, later=True)


def _round_trips(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The statements of each round trip the driver makes, as it makes them."""
    trips: list[int] = []
    original = round_trips.round_trip

    async def counted(sync: Any, statements: Sequence[Any], *rest: Any) -> Any:
        trips.append(len(statements))
        return await original(sync, statements, *rest)

    monkeypatch.setattr(round_trips, "round_trip", counted)
    return trips


async def _warm(engine: AsyncEngine) -> None:
    """Each statement once, SQLAlchemy's way: the next sightings go to the driver."""
    async with engine.begin() as conn:
        await conn.execute(_LOCK, {"b_id": "nobody"})
        await conn.execute(_COUNT)
        await conn.execute(_LOCKED)


async def _count(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(OUTBOX))).scalar_one())


async def test_queued_writes_ride_with_the_next_statement(
    mysql_engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _warm(mysql_engine)
    trips = _round_trips(monkeypatch)
    async with mysql_engine.begin() as conn:
        await _queue_events(conn, "a", "b")
        await _queue_events(conn, "c")
        await write_later(conn, _LOCK, {"b_id": "b"}, expect=1)
        await write_later(conn, _LOCK, {"b_id": "c"}, expect=1)
        assert trips == [], "nothing sent while only writes are queued"
        assert (await conn.execute(_LOCKED)).scalars().all() == ["b", "c"]
        assert trips == [5], "four queued writes and the read in one round trip"
    assert trips == [5], "nothing left to send at the commit"
    assert await _count(mysql_engine) == 3


async def test_writes_queued_last_are_sent_before_the_commit(
    mysql_engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _warm(mysql_engine)
    trips = _round_trips(monkeypatch)
    async with mysql_engine.begin() as conn:
        await _queue_events(conn, "a")
        await write_later(conn, _LOCK, {"b_id": "a"}, expect=1)
    assert trips == [2]
    async with mysql_engine.connect() as conn:
        assert (await conn.execute(_LOCKED)).scalars().all() == ["a"]


async def test_a_statement_on_sqlalchemys_path_sends_the_queue_first(
    mysql_engine: AsyncEngine,
) -> None:
    row = {**_FIXED, **_rows("a")[0], "availableAt": func.now(3), "createdAt": func.now(3)}
    with pytest.raises(IntegrityError):
        async with mysql_engine.begin() as conn:
            await _queue_events(conn, "a")
            # An INSERT always goes SQLAlchemy's way; it must find the queued row's key taken.
            await conn.execute(insert(OUTBOX).values(**row))
    assert await _count(mysql_engine) == 0, "the failed transaction wrote nothing"


async def test_a_failed_count_check_fails_the_transaction(mysql_engine: AsyncEngine) -> None:
    await _warm(mysql_engine)
    with pytest.raises(RuntimeError, match="0 rows matched, 1 expected"):
        async with mysql_engine.begin() as conn:
            await _queue_events(conn, "a")
            await write_later(conn, _LOCK, {"b_id": "nobody"}, expect=1)
            await conn.execute(_COUNT)
    assert await _count(mysql_engine) == 0


@pytest.mark.parametrize("folded", [False, True], ids=["before-the-commit", "with-the-commit"])
async def test_a_count_that_does_not_match_stops_the_commit(
    mysql_engine: AsyncEngine, folded: bool
) -> None:
    """Sent before SQLAlchemy's COMMIT (the commit listener), or with the COMMIT itself, where
    the guard after the write stops the server before the writes after it and the COMMIT."""
    await _warm(mysql_engine)
    with pytest.raises(RuntimeError, match="the lock: 0 rows matched, 1 expected"):
        async with mysql_engine.begin() as conn:
            await _queue_events(conn, "a")
            await write_later(conn, _LOCK, {"b_id": "nobody"}, expect=1, what="the lock")
            await _queue_events(conn, "b")
            if folded:
                await commit_with_queued(conn)
    assert await _count(mysql_engine) == 0


async def test_a_failing_write_stops_the_ones_after_it_and_shows_no_values(
    mysql_engine: AsyncEngine,
) -> None:
    await _warm(mysql_engine)
    async with mysql_engine.begin() as conn:
        await _queue_events(conn, "a")
    with pytest.raises(IntegrityError) as raised:
        async with mysql_engine.begin() as conn:
            await _queue_events(conn, "b")
            await _queue_events(conn, "a", secret="the-job-content")
            await write_later(conn, _LOCK, {"b_id": "b"}, expect=1)
            await send_queued(conn)
    assert "the-job-content" not in str(raised.value)
    assert await _count(mysql_engine) == 1
    async with mysql_engine.connect() as conn:
        assert (await conn.execute(_LOCKED)).scalars().all() == []


async def test_a_rollback_drops_the_queue(mysql_engine: AsyncEngine) -> None:
    await _warm(mysql_engine)
    async with mysql_engine.connect() as conn:
        await _queue_events(conn, "a")
        await conn.rollback()
        # The same connection's next transaction carries nothing of the first.
        await conn.execute(_COUNT)
        await conn.commit()
    assert await _count(mysql_engine) == 0


async def test_each_queued_write_is_told_to_the_listeners_when_queued(
    mysql_engine: AsyncEngine,
) -> None:
    await _warm(mysql_engine)
    told: list[str] = []
    event.listen(mysql_engine.sync_engine, "before_cursor_execute", lambda *a: told.append(a[2]))
    async with mysql_engine.begin() as conn:
        await _queue_events(conn, "a")
        await write_later(conn, _LOCK, {"b_id": "a"}, expect=1)
        assert [sql.split()[0] for sql in told] == ["INSERT", "UPDATE"]


async def _commits(conn: AsyncConnection) -> int:
    found = await conn.exec_driver_sql("SHOW SESSION STATUS LIKE 'Com_commit'")
    return int(found.one()._mapping["Value"])


async def test_the_queue_goes_with_the_commit_and_the_commit_is_sent_once(
    mysql_engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _warm(mysql_engine)
    async with mysql_engine.connect() as conn:
        before = await _commits(conn)
        await conn.commit()
        trips = _round_trips(monkeypatch)
        async with conn.begin():
            await _queue_events(conn, "a", "b")
            await write_later(conn, _LOCK, {"b_id": "a"}, expect=1)
            await commit_with_queued(conn)
        # The insert, the update, its guard and the COMMIT.
        assert trips == [4]
        assert await _commits(conn) == before + 1 + 1, "this transaction's and the last one's"
        await conn.commit()
    async with mysql_engine.connect() as conn:
        assert (await conn.execute(_LOCKED)).scalars().all() == ["a"]
    assert await _count(mysql_engine) == 2


async def test_the_next_transaction_on_the_connection_commits_for_itself(
    mysql_engine: AsyncEngine,
) -> None:
    await _warm(mysql_engine)
    async with mysql_engine.connect() as conn:
        async with conn.begin():
            await _queue_events(conn, "a")
            await commit_with_queued(conn)
        async with conn.begin():
            # Nothing queued: SQLAlchemy's COMMIT, which must not be skipped as the last was.
            await conn.execute(_LOCK, {"b_id": "a"})
    async with mysql_engine.connect() as conn:
        assert (await conn.execute(_LOCKED)).scalars().all() == ["a"]


async def test_a_failure_after_the_folded_commit_does_not_skip_the_next_commit(
    mysql_engine: AsyncEngine,
) -> None:
    await _warm(mysql_engine)
    async with mysql_engine.connect() as conn:
        with pytest.raises(KeyboardInterrupt):
            async with conn.begin():
                await _queue_events(conn, "a")
                await commit_with_queued(conn)
                # As a task cancelled between the round trip and SQLAlchemy's commit.
                raise KeyboardInterrupt
        async with conn.begin():
            await conn.execute(_LOCK, {"b_id": "a"})
    async with mysql_engine.connect() as conn:
        assert (await conn.execute(_LOCKED)).scalars().all() == ["a"]
    assert await _count(mysql_engine) == 1, "the folded COMMIT had committed the insert"


async def test_a_guard_counts_matched_rows_not_changed_ones(mysql_engine: AsyncEngine) -> None:
    """The engine connects with CLIENT_FOUND_ROWS: ROW_COUNT() is the rows matched, as the
    driver's count is, so a write that leaves its row as it was passes its guard."""
    await _warm(mysql_engine)
    async with mysql_engine.begin() as conn:
        await _queue_events(conn, "a")
    for _ in range(2):  # the second time the row already holds the values written
        async with mysql_engine.begin() as conn:
            await write_later(conn, _LOCK, {"b_id": "a"}, expect=1)
            await commit_with_queued(conn)
    async with mysql_engine.connect() as conn:
        assert (await conn.execute(_LOCKED)).scalars().all() == ["a"]

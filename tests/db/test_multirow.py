"""Multi-row inserts (scheduler_service/sql/db/multirow.py) on SQLite and MariaDB: one statement for
many rows, JSON processed as SQLAlchemy would, the clock in SQL, duplicates left alone."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Table, event, select
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.sql.db.clock import db_today
from scheduler_service.sql.db.models import AiUserJobGate, OutboxEvent
from scheduler_service.sql.db.multirow import insert_rows
from scheduler_service.sql.db.spend_models import AiUserSpend

OUTBOX = cast(Table, OutboxEvent.__table__)
FIXED = {"aggregateType": "AiJob", "status": "pending", "attemptCount": 0}


def _rows(count: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "eventType": "ai.job.enqueue",
            "aggregateId": f"job-{i}",
            "dedupeKey": f"ai.job.enqueue:job-{i}",
            "payload": {"jobId": f"job-{i}", "nested": {"n": i, "text": "ü"}},
        }
        for i in range(start, start + count)
    ]


async def test_many_rows_go_in_one_statement_with_json_and_the_clock(engine: AsyncEngine) -> None:
    sent: list[str] = []
    event.listen(engine.sync_engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    async with engine.begin() as conn:
        await insert_rows(
            conn, OUTBOX, _rows(37), stamped=("availableAt", "createdAt"), fixed=FIXED
        )
        await insert_rows(
            conn, OUTBOX, _rows(3, 37), stamped=("availableAt", "createdAt"), fixed=FIXED
        )
    assert len([s for s in sent if s.lstrip().upper().startswith("INSERT")]) == 2
    async with engine.connect() as conn:
        rows = (await conn.execute(select(OUTBOX).order_by(OUTBOX.c.id))).mappings().all()
    assert [r["aggregateId"] for r in rows] == [f"job-{i}" for i in range(40)]
    assert rows[5]["payload"] == {"jobId": "job-5", "nested": {"n": 5, "text": "ü"}}
    assert all(r["status"] == "pending" and r["createdAt"] is not None for r in rows)


async def test_duplicate_keys_are_left_alone(engine: AsyncEngine) -> None:
    first = [{"userId": "a"}, {"userId": "b"}]
    table = cast(Table, AiUserJobGate.__table__)
    async with engine.begin() as conn:
        await insert_rows(conn, table, first, stamped=("updatedAt",), ignore_duplicates=True)
        await insert_rows(
            conn,
            table,
            [{"userId": "b"}, {"userId": "c"}],
            stamped=("updatedAt",),
            ignore_duplicates=True,
        )
    async with engine.connect() as conn:
        users = list(
            (await conn.execute(select(table.c.userId).order_by(table.c.userId))).scalars()
        )
    assert users == ["a", "b", "c"]


async def test_accumulated_columns_add_up_on_existing_keys_in_one_statement(
    engine: AsyncEngine,
) -> None:
    """A counter's upsert (the users' spend of the day): new keys inserted, existing ones added
    to, all in one statement."""
    table = cast(Table, AiUserSpend.__table__)
    today = db_today()
    sent: list[str] = []
    event.listen(engine.sync_engine, "before_cursor_execute", lambda *a: sent.append(a[2]))

    async def add(rows: list[dict[str, Any]]) -> None:
        async with engine.begin() as conn:
            await insert_rows(
                conn,
                table,
                rows,
                stamped=(),
                fixed={"day": today},
                accumulate=("tokens", "costMicros"),
            )

    await add(
        [
            {"userId": "a", "tokens": 10, "costMicros": 1},
            {"userId": "b", "tokens": 5, "costMicros": 2},
        ]
    )
    await add(
        [
            {"userId": "b", "tokens": 7, "costMicros": 3},
            {"userId": "c", "tokens": 1, "costMicros": 0},
        ]
    )
    assert len([s for s in sent if s.lstrip().upper().startswith("INSERT")]) == 2
    async with engine.connect() as conn:
        found = (
            await conn.execute(
                select(table.c.userId, table.c.tokens, table.c.costMicros).order_by(table.c.userId)
            )
        ).all()
    assert [tuple(row) for row in found] == [("a", 10, 1), ("b", 12, 5), ("c", 1, 0)]


async def test_replaced_columns_take_the_new_values_on_existing_keys_in_one_statement(
    engine: AsyncEngine,
) -> None:
    """The users' fair-dispatch places: existing gates moved on, missing ones made, one
    statement; a replaced row keeps its other columns (its stamp)."""
    table = cast(Table, AiUserJobGate.__table__)
    async with engine.begin() as conn:
        await insert_rows(conn, table, [{"userId": "a", "fairSeq": 1}], stamped=("updatedAt",))
    async with engine.connect() as conn:
        stamp = (await conn.execute(select(table.c.updatedAt))).scalar_one()
    sent: list[str] = []
    event.listen(engine.sync_engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    async with engine.begin() as conn:
        await insert_rows(
            conn,
            table,
            [{"userId": "a", "fairSeq": 7}, {"userId": "b", "fairSeq": -3}],
            stamped=("updatedAt",),
            replace=("fairSeq",),
        )
    assert len(sent) == 1
    async with engine.connect() as conn:
        found = (
            await conn.execute(
                select(table.c.userId, table.c.fairSeq, table.c.updatedAt).order_by(table.c.userId)
            )
        ).all()
    assert [(row.userId, row.fairSeq) for row in found] == [("a", 7), ("b", -3)]
    assert found[0].updatedAt == stamp

"""The pool's rollback on return (scheduler_service/sql/db/engine.py): skipped after a commit — one
round trip less per write transaction — and kept for every connection returned any other way, so
none goes back to the pool inside a transaction. Counted by the server, on one pooled
connection."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.uow import SqlUnitOfWork
from tests.conftest import DatabaseFactory

pytestmark = pytest.mark.mysql


@pytest.fixture
async def one_connection(mysql_database: DatabaseFactory) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(await mysql_database(), pool_size=1)
    try:
        yield engine
    finally:
        await engine.dispose()


async def _rollbacks(engine: AsyncEngine) -> int:
    """ROLLBACKs the pool's one connection has run (this read's own comes after it)."""
    async with engine.connect() as conn:
        found = await conn.execute(text("SHOW SESSION STATUS LIKE 'Com_rollback'"))
        return int(found.one()[1])


async def test_a_committed_transaction_goes_back_without_a_rollback(
    one_connection: AsyncEngine,
) -> None:
    uow = SqlUnitOfWork(one_connection)
    before = await _rollbacks(one_connection)
    for _ in range(3):
        await uow.run(lambda tx: tx.reads.clock())
    # The only rollback between the two reads is the first read's own, as it closed.
    assert await _rollbacks(one_connection) == before + 1


async def test_a_transaction_that_did_not_commit_is_rolled_back(
    one_connection: AsyncEngine,
) -> None:
    async def fails(_tx: object) -> None:
        raise ValueError("no commit")

    uow = SqlUnitOfWork(one_connection)
    before = await _rollbacks(one_connection)
    with pytest.raises(ValueError):
        await uow.run(fails)
    # The first read's own, the transaction's, and the pool's (as SQLAlchemy's default would).
    after_failure = await _rollbacks(one_connection)
    assert after_failure == before + 3
    # A transaction the driver opened behind SQLAlchemy's back is ended by the pool.
    async with one_connection.connect() as conn:
        raw = await conn.get_raw_connection()
        await conn.commit()
        driver = raw.driver_connection
        assert driver is not None
        cursor = driver.cursor()
        await cursor.execute("SELECT 1 FROM dual FOR UPDATE")
        await cursor.close()
    assert await _rollbacks(one_connection) == after_failure + 2

"""The pool's ping before a connection is used (sql/db/engine.py): only after an idle
spell, so that a busy scheduler does not pay a round trip per transaction, and still in time to
replace a connection that died while it waited in the pool. The connection is killed by the
server (``KILL CONNECTION``), as a restart or an idle timeout would."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.core.errors import DatabaseUnavailableError
from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.uow import SqlTransaction, SqlUnitOfWork
from tests.conftest import DatabaseFactory

pytestmark = pytest.mark.mysql

EngineOf = Callable[[float], Awaitable[AsyncEngine]]


@pytest.fixture
async def one_connection_engine(mysql_database: DatabaseFactory) -> AsyncIterator[EngineOf]:
    """Engines of one pooled connection, pinged after ``ping_after_idle_s`` of idling."""
    url = await mysql_database()
    engines: list[AsyncEngine] = []

    async def make(ping_after_idle_s: float) -> AsyncEngine:
        engines.append(create_engine(url, pool_size=1, ping_after_idle_s=ping_after_idle_s))
        return engines[-1]

    try:
        yield make
    finally:
        for engine in engines:
            await engine.dispose()


async def _connection_id(uow: SqlUnitOfWork) -> int:
    async def read(tx: SqlTransaction) -> int:
        found = await tx.conn.execute(text("SELECT CONNECTION_ID()"))
        return int(found.scalar_one())

    return await uow.run(read)


async def _killed(connection_id: int, admin: AsyncEngine) -> None:
    """Kill the pooled connection from outside and wait until the server no longer lists it."""
    async with admin.connect() as conn:
        await conn.execute(text(f"KILL CONNECTION {connection_id}"))
        while (
            await conn.execute(
                text("SELECT COUNT(*) FROM information_schema.processlist WHERE id = :id"),
                {"id": connection_id},
            )
        ).scalar_one():
            await conn.rollback()


async def test_a_connection_that_died_while_idle_is_replaced_before_it_is_used(
    one_connection_engine: EngineOf,
) -> None:
    engine = await one_connection_engine(0)  # every checkout is past the idle window
    admin = await one_connection_engine(0)
    uow = SqlUnitOfWork(engine)
    first = await _connection_id(uow)
    await _killed(first, admin)
    # The ping finds it dead: a new connection runs the transaction, which never sees the loss.
    assert await _connection_id(uow) != first


async def test_a_connection_back_within_the_window_is_used_without_a_ping(
    one_connection_engine: EngineOf,
) -> None:
    engine = await one_connection_engine(3600)
    admin = await one_connection_engine(0)
    uow = SqlUnitOfWork(engine)
    first = await _connection_id(uow)
    await _killed(first, admin)
    # No ping: the dead connection is used, and its transaction fails as one that lost its
    # connection mid-way does (nothing written, retryable)...
    with pytest.raises(DatabaseUnavailableError):
        await _connection_id(uow)
    # ...and the pool has let it go: the next one runs on a new connection.
    assert await _connection_id(uow) != first

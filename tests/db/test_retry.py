"""The transaction retry wrapper: real deadlocks are re-run, an unreachable database is typed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import cast

import pytest
from sqlalchemy import Table, select, text, update
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from scheduler_service.db.engine import create_engine
from scheduler_service.db.models import AiJob
from scheduler_service.db.retry import DEADLOCK, is_retryable_conflict, run_transaction
from scheduler_service.errors import DatabaseUnavailableError
from scheduler_service.lifecycle.repository import LifecycleRepository
from tests.db.helpers import create_job, raw_row

JOBS = cast(Table, AiJob.__table__)


@pytest.mark.mysql
async def test_a_real_deadlock_is_re_run_to_completion(mysql_engine: AsyncEngine) -> None:
    """Two units lock two rows in opposite orders; InnoDB kills one, which is re-run whole."""
    repo = LifecycleRepository(mysql_engine)
    first, second = await create_job(repo, mysql_engine), await create_job(repo, mysql_engine)
    holds = {first: asyncio.Event(), second: asyncio.Event()}
    runs = {first: 0, second: 0}

    def unit(mine: str, theirs: str) -> Callable[[AsyncConnection], Awaitable[None]]:
        async def run(conn: AsyncConnection) -> None:
            runs[mine] += 1
            await conn.execute(
                update(JOBS).where(JOBS.c.id == mine).values(progress=JOBS.c.progress + 1)
            )
            if runs[mine] == 1:
                holds[mine].set()
                await holds[theirs].wait()  # both hold one row before either asks for the other
            await conn.execute(
                update(JOBS).where(JOBS.c.id == theirs).values(progress=JOBS.c.progress + 1)
            )

        return run

    await asyncio.wait_for(
        asyncio.gather(
            run_transaction(mysql_engine, unit(first, second)),
            run_transaction(mysql_engine, unit(second, first)),
        ),
        timeout=60,
    )
    assert sorted(runs.values()) == [1, 2], "exactly one unit was the deadlock victim and re-ran"
    for job_id in (first, second):
        assert (await raw_row(mysql_engine, job_id))["progress"] == 2  # each unit counted once


async def test_non_retryable_errors_are_not_re_run(engine: AsyncEngine) -> None:
    calls = 0

    async def unit(conn: AsyncConnection) -> None:
        nonlocal calls
        calls += 1
        await conn.execute(text("SELECT noSuchColumn FROM AiAnalysisJob"))

    with pytest.raises(DBAPIError):
        await run_transaction(engine, unit)
    assert calls == 1


def test_deadlock_and_lock_wait_are_retryable() -> None:
    class Orig(Exception):
        pass

    for errno, expected in ((DEADLOCK, True), (1205, True), (1062, False)):
        exc = OperationalError("stmt", {}, Orig(errno, "message"))
        assert is_retryable_conflict(exc) is expected
    assert is_retryable_conflict(OperationalError("s", {}, Orig("database is locked")))
    assert not is_retryable_conflict(ValueError())


@pytest.mark.mysql
async def test_unreachable_mysql_is_database_unavailable() -> None:
    engine = create_engine("mysql+asyncmy://root@127.0.0.1:1/test", pool_size=1)

    async def unit(conn: AsyncConnection) -> None:
        await conn.execute(select(1))

    try:
        with pytest.raises(DatabaseUnavailableError):
            await run_transaction(engine, unit)
    finally:
        await engine.dispose()

"""The unit of work's re-run and error mapping: real deadlocks are re-run, an unreachable
database is typed on writes and reads alike, and hooks follow the outcome."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import cast

import pytest
from sqlalchemy import Table, select, text, update
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.core.errors import DatabaseUnavailableError
from scheduler_service.core.events import EventType
from scheduler_service.ports import Wakeups
from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.db.models import AiJob
from scheduler_service.sql.db.retry import DEADLOCK, is_retryable_conflict
from scheduler_service.sql.uow import SqlTransaction, SqlUnitOfWork
from tests.support.db import create_job, raw_row
from tests.support.store import StoreCalls

JOBS = cast(Table, AiJob.__table__)


@pytest.mark.mysql
async def test_a_real_deadlock_is_re_run_to_completion(mysql_engine: AsyncEngine) -> None:
    """Two units lock two rows in opposite orders; InnoDB kills one, which is re-run whole."""
    repo = StoreCalls(mysql_engine)
    first, second = await create_job(repo, mysql_engine), await create_job(repo, mysql_engine)
    holds = {first: asyncio.Event(), second: asyncio.Event()}
    runs = {first: 0, second: 0}
    committed: Counter[str] = Counter()
    rolled_back: Counter[str] = Counter()

    def unit(mine: str, theirs: str) -> Callable[[SqlTransaction], Awaitable[None]]:
        async def run(tx: SqlTransaction) -> None:
            runs[mine] += 1
            tx.after_commit(lambda: committed.update([mine]))
            tx.after_rollback(lambda: rolled_back.update([mine]))
            await tx.conn.execute(
                update(JOBS).where(JOBS.c.id == mine).values(progress=JOBS.c.progress + 1)
            )
            if runs[mine] == 1:
                holds[mine].set()
                await holds[theirs].wait()  # both hold one row before either asks for the other
            await tx.conn.execute(
                update(JOBS).where(JOBS.c.id == theirs).values(progress=JOBS.c.progress + 1)
            )

        return run

    await asyncio.wait_for(
        asyncio.gather(
            SqlUnitOfWork(mysql_engine).run(unit(first, second)),
            SqlUnitOfWork(mysql_engine).run(unit(second, first)),
        ),
        timeout=60,
    )
    assert sorted(runs.values()) == [1, 2], "exactly one unit was the deadlock victim and re-ran"
    # Each unit's after-commit hook ran once; only the victim's rolled-back attempt ran its
    # after-rollback hook, and that attempt's after-commit hook was dropped.
    assert committed == {first: 1, second: 1}
    assert sum(rolled_back.values()) == 1
    for job_id in (first, second):
        assert (await raw_row(mysql_engine, job_id))["progress"] == 2  # each unit counted once


async def test_non_retryable_errors_are_not_re_run(engine: AsyncEngine) -> None:
    calls = 0

    async def unit(tx: SqlTransaction) -> None:
        nonlocal calls
        calls += 1
        await tx.conn.execute(text("SELECT noSuchColumn FROM AiAnalysisJob"))

    with pytest.raises(DBAPIError):
        await SqlUnitOfWork(engine).run(unit)
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

    async def unit(tx: SqlTransaction) -> None:
        await tx.conn.execute(select(1))

    try:
        with pytest.raises(DatabaseUnavailableError):
            await SqlUnitOfWork(engine).run(unit)
        with pytest.raises(DatabaseUnavailableError):  # reads take the same path
            await SqlUnitOfWork(engine).read(unit)
    finally:
        await engine.dispose()


async def test_hooks_and_events_follow_the_outcome(engine: AsyncEngine) -> None:
    """after_commit runs only once committed, after_rollback only when rolled back, and an
    emitted event wakes this replica's readers only after its commit."""
    woken: list[str] = []
    wakeups = Wakeups(
        outbox=lambda event_type: woken.append(f"outbox:{event_type.value}"),
        job_changed=lambda job_id: woken.append(f"changed:{job_id}"),
        job_ended=lambda job_id: woken.append(f"ended:{job_id}"),
    )
    uow = SqlUnitOfWork(engine, wakeups)
    seen: list[str] = []

    class Boom(Exception):
        pass

    async def failing(tx: SqlTransaction) -> None:
        tx.after_commit(lambda: seen.append("commit"))
        tx.after_rollback(lambda: seen.append("rollback"))
        await tx.emit(EventType.FAILED, job_id="j-1", job_type="synthetic_echo")
        raise Boom

    with pytest.raises(Boom):
        await uow.run(failing)
    assert (seen, woken) == (["rollback"], [])

    async def succeeding(tx: SqlTransaction) -> None:
        tx.after_commit(lambda: seen.append("commit"))
        tx.after_rollback(lambda: seen.append("rollback"))
        await tx.emit(EventType.FAILED, job_id="j-1", job_type="synthetic_echo")
        assert woken == []  # nothing before the commit

    await uow.run(succeeding)
    assert seen == ["rollback", "commit"]
    assert woken == ["outbox:ai.job.failed", "changed:j-1", "ended:j-1"]

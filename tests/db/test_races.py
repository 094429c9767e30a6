"""Concurrent writers on real MariaDB connections: exactly one wins every race.

Each racer runs on its own pooled connection (the engine keeps 25), so the guarded UPDATEs really
meet in InnoDB's row locks rather than being serialised by one connection.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.core.errors import (
    JobAlreadyTerminalError,
    JobLockConflictError,
    LifecycleError,
)
from scheduler_service.core.records import LeaseGrant
from scheduler_service.core.state_machine import LEGACY_STATUS_OF, LifecycleStatus
from scheduler_service.sql.db.models import AiJob
from tests.support.db import create_job, raw_row
from tests.support.store import StoreCalls

pytestmark = pytest.mark.mysql

S = LifecycleStatus
HASH = "b" * 64


async def _gather_outcomes(*calls: Awaitable[object]) -> list[object]:
    return list(await asyncio.gather(*calls, return_exceptions=True))


async def test_twenty_racing_locks_have_one_winner(
    mysql_repo: StoreCalls, mysql_engine: AsyncEngine
) -> None:
    for _ in range(5):
        job_id = await create_job(mysql_repo, mysql_engine)
        outcomes = await _gather_outcomes(*(mysql_repo.lock(job_id, f"rt-{i}") for i in range(20)))
        winners = [o for o in outcomes if isinstance(o, LeaseGrant)]
        losers = [o for o in outcomes if isinstance(o, JobLockConflictError)]
        assert len(winners) == 1, outcomes
        assert len(losers) == 19, outcomes
        assert winners[0].attempt_no == 1
        row = await raw_row(mysql_engine, job_id)
        assert row["attemptCount"] == 1
        assert row["lockedBy"] == f"rt-{outcomes.index(winners[0])}"


async def test_succeed_racing_cancel_ends_in_one_terminal_state(
    mysql_repo: StoreCalls, mysql_engine: AsyncEngine
) -> None:
    seen: Counter[str] = Counter()
    for _ in range(30):
        job_id = await create_job(mysql_repo, mysql_engine)
        await mysql_repo.lock(job_id, "rt-1")
        assert await mysql_repo.request_cancellation(job_id) == "cancel_requested"
        outcomes = await _gather_outcomes(
            mysql_repo.mark_succeeded(
                job_id, 1, output_hash=HASH, result_idempotency_key=f"{job_id}:1:{HASH}"
            ),
            mysql_repo.mark_cancelled(job_id, attempt_no=1),
        )
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        assert len(failures) == 1, outcomes
        assert isinstance(failures[0], LifecycleError)
        row = await raw_row(mysql_engine, job_id)
        assert row["lifecycleStatus"] in {S.SUCCEEDED.value, S.CANCELLED.value}
        assert failures[0].current == row["lifecycleStatus"]
        seen[row["lifecycleStatus"]] += 1
    assert sum(seen.values()) == 30


async def test_cancel_racing_lock_never_leaves_a_running_cancelled_job(
    mysql_repo: StoreCalls, mysql_engine: AsyncEngine
) -> None:
    for _ in range(30):
        job_id = await create_job(mysql_repo, mysql_engine)
        lock, cancel = await _gather_outcomes(
            mysql_repo.lock(job_id, "rt-1"), mysql_repo.request_cancellation(job_id)
        )
        row = await raw_row(mysql_engine, job_id)
        if isinstance(lock, LeaseGrant):
            assert cancel == "cancel_requested"
            assert row["lifecycleStatus"] == S.RUNNING.value and row["cancelRequestedAt"]
        else:
            # The cancel won: the lock finds a terminal job and says which state it is in.
            assert cancel == "cancelled"
            assert isinstance(lock, JobAlreadyTerminalError) and lock.current == S.CANCELLED
            assert row["lifecycleStatus"] == S.CANCELLED.value


async def test_status_always_matches_lifecycle_status(
    mysql_repo: StoreCalls, mysql_engine: AsyncEngine
) -> None:
    # Run the races above on fresh jobs, then check every row the store wrote.
    await test_twenty_racing_locks_have_one_winner(mysql_repo, mysql_engine)
    await test_succeed_racing_cancel_ends_in_one_terminal_state(mysql_repo, mysql_engine)
    table = AiJob.__table__
    async with mysql_engine.connect() as conn:
        rows = (
            await conn.execute(
                select(table.c.lifecycleStatus, table.c.status, func.count()).group_by(
                    table.c.lifecycleStatus, table.c.status
                )
            )
        ).all()
    assert rows
    for lifecycle, legacy, _count in rows:
        assert legacy == LEGACY_STATUS_OF[S(lifecycle)]

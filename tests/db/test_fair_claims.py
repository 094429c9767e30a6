"""Fair places and per-user running caps in the SQL claim, on SQLite and MariaDB (issue 16)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.lifecycle.fairness import RunningCaps
from tests.support.db import create_job, raw_row
from tests.support.store import StoreCalls

TYPES = ["synthetic_echo"]


async def test_places_interleave_a_backlog_with_a_newcomer(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    backlog = [await create_job(repo, engine, user_id="big") for _ in range(5)]
    newcomer = await create_job(repo, engine, user_id="small")
    places = [(await raw_row(engine, job_id))["fairSeq"] for job_id in backlog]
    assert places == sorted(places) and len(set(places)) == 5
    assert (await raw_row(engine, newcomer))["fairSeq"] < places[0]
    ((first, *rest),) = await repo.claim_batches(TYPES, [("rt-1", 3)])
    assert first.job_id == newcomer
    assert [grant.job_id for grant in rest] == backlog[:2]


async def test_running_caps_leave_a_capped_users_jobs_queued(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    for _ in range(6):
        await create_job(repo, engine, user_id="big")
    other = await create_job(repo, engine, user_id="small")
    caps = RunningCaps(default=2, overrides={"small": 1})
    (share,) = await repo.claim_batches(TYPES, [("rt-1", 5)], running_caps=caps)
    users = [(await raw_row(engine, grant.job_id))["userId"] for grant in share]
    assert sorted(users) == ["big", "big", "small"]
    assert other in {grant.job_id for grant in share}
    # The cap counts jobs already running: nothing more for either user until one ends.
    assert await repo.claim_batches(TYPES, [("rt-2", 5)], running_caps=caps) == [[]]
    uncapped = await repo.claim_batches(TYPES, [("rt-2", 5)])
    assert len(uncapped[0]) == 4

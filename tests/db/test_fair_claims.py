"""Fair places and per-user running caps in the SQL claim, on SQLite and MariaDB."""

from __future__ import annotations

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.core.fairness import RunningCaps
from scheduler_service.ports import Transaction
from tests.support.db import create_job, make_job, raw_row
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


async def test_a_gated_create_places_its_users_from_the_places_read_with_their_counts(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    """A create that checks limits locks its users' gates and reads their counts and places in
    one statement; placing its jobs reads no gate again, and gives the places a fresh read
    would: the backlog's user after their last place, the newcomer ahead of the queue."""
    backlog = [await create_job(repo, engine, user_id="big") for _ in range(3)]
    last = max([(await raw_row(engine, job_id))["fairSeq"] for job_id in backlog])
    head = min([(await raw_row(engine, job_id))["fairSeq"] for job_id in backlog])
    jobs = [make_job(user_id="big"), make_job(user_id="fresh")]
    sent: list[str] = []
    event.listen(engine.sync_engine, "before_cursor_execute", lambda *a: sent.append(a[2]))

    async def work(tx: Transaction) -> tuple[dict[str, tuple[int, int]], list[int]]:
        counts = await tx.gates.lock_user_gates(["big", "fresh"])
        return counts, await tx.gates.fair_places(jobs)

    counts, places = await repo.uow.run(work)
    assert counts == {"big": (3, 3), "fresh": (0, 0)}
    assert places[0] > last and places[1] < head
    # The gates' upsert, the counts and places, the places' upsert: no other statement on them.
    assert len([s for s in sent if "AiUserJobGate" in s]) == 3

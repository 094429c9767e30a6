"""Two runtime fleets on their own tokens (the setup docs/security.md recommends) drain side by
side: two real runtime processes per token, 300 jobs, every one succeeds on its first attempt.

Their reports share the scheduler's batch windows; each is judged as its own caller. Judged as
whichever caller opened the window, a third of one fleet's results were refused ("belongs to
another runtime token"), and those jobs waited out their lease and spent an attempt."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select

from devtools.harness.runtime_client import JobClient
from devtools.harness.waiting import eventually
from tests.support.db_checks import JOBS
from tests.support.runtime_procs import Launcher
from tests.support.schedulers import SchedulerFactory

pytestmark = pytest.mark.mysql

JOBS_TOTAL = 300
FLEETS = {"fleet-a-": "runtime-token-of-fleet-a", "fleet-b-": "runtime-token-of-fleet-b"}


async def test_two_fleets_on_their_own_tokens_drain_on_first_attempts(
    mysql_url: str, start_scheduler: SchedulerFactory, launch: Launcher
) -> None:
    scheduler = await start_scheduler(
        mysql_url,
        runtime_identities=",".join(f"{prefix}={token}" for prefix, token in FLEETS.items()),
        max_active_jobs_per_user=JOBS_TOTAL,
    )
    for prefix, token in FLEETS.items():
        for n in range(2):
            launch(scheduler, f"{prefix}{n}", AIJOB_RUNTIME_TOKEN=token, AIJOB_RUNTIME_SLOTS="8")
    jobs = JobClient(scheduler.channel)
    gate = asyncio.Semaphore(16)

    async def create(index: int) -> None:
        async with gate:
            await jobs.create(snapshot={"index": index})

    await asyncio.gather(*(create(i) for i in range(JOBS_TOTAL)))
    engine = scheduler.app.engine

    async def by_status() -> dict[tuple[str, int], int]:
        query = select(JOBS.c.lifecycleStatus, JOBS.c.attemptCount, func.count()).group_by(
            JOBS.c.lifecycleStatus, JOBS.c.attemptCount
        )
        async with engine.connect() as conn:
            return {(s, a): n for s, a, n in (await conn.execute(query)).all()}

    async def drained() -> bool:
        counts = await by_status()
        return sum(n for (status, _), n in counts.items() if status == "succeeded") == JOBS_TOTAL

    await eventually(drained, within_s=240, every_s=0.5)
    counts = await by_status()
    # Both fleets did work, and at least 299 of 300 jobs needed one attempt.
    assert counts.get(("succeeded", 1), 0) >= JOBS_TOTAL - 1, counts
    async with engine.connect() as conn:
        holders = (await conn.execute(select(JOBS.c.lockedBy).distinct())).scalars().all()
    assert {h.rsplit("-", 1)[0] + "-" for h in holders if h} == set(FLEETS)

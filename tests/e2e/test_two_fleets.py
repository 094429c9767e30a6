"""Two runtime fleets on their own tokens (the setup docs/security.md recommends) drain side by
side: two real runtime processes per token, 300 jobs, all but at most one succeed on their first
attempt, no report is refused and no lease runs out.

Their reports share the scheduler's batch windows; each is judged as its own caller. Judged as
whichever caller opened the window, a third of one fleet's results were refused ("belongs to
another runtime token"), and those jobs waited out their lease and spent an attempt. A failure
lists each retried job's attempts (their recorded codes and runtimes) and the runtime log lines
that name it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from devtools.harness.runtime_client import JobClient
from devtools.harness.waiting import eventually
from scheduler_service.services import metrics
from scheduler_service.sql.db.models import AiUsageLog
from tests.support.db_checks import JOBS
from tests.support.runtime_procs import Launcher
from tests.support.schedulers import SchedulerFactory

pytestmark = pytest.mark.mysql

JOBS_TOTAL = 300
FLEETS = {"fleet-a-": "runtime-token-of-fleet-a", "fleet-b-": "runtime-token-of-fleet-b"}


def _total(metric: Any, **labels: str) -> float:
    """The sum of ``metric``'s samples whose labels include ``labels``."""
    return float(
        sum(
            sample.value
            for family in metric.collect()
            for sample in family.samples
            if sample.name.endswith("_total") and labels.items() <= sample.labels.items()
        )
    )


def _misjudged() -> float:
    return (
        _total(metrics.REPORTS, code="PERMISSION_DENIED")
        + _total(metrics.RPCS, code="PERMISSION_DENIED")
        + _total(metrics.LEASE_EXPIRIES)
    )


def _log_lines(logs: Path) -> list[str]:
    return [line for log in sorted(logs.glob("*.log")) for line in log.read_text().splitlines()]


async def _retried_attempts(engine: AsyncEngine, logs: Path) -> list[str]:
    """Each job that took more than one attempt: its attempts' recorded codes and the runtime log
    lines naming it (a job's row keeps no code once it succeeded)."""
    usage = AiUsageLog.__table__
    async with engine.connect() as conn:
        retried = (
            (await conn.execute(select(JOBS.c.id).where(JOBS.c.attemptCount > 1))).scalars().all()
        )
        attempts = (
            await conn.execute(
                select(
                    usage.c.jobId, usage.c.attemptNo, usage.c.errorCode, usage.c.runtimeInstanceId
                )
                .where(usage.c.jobId.in_(retried))
                .order_by(usage.c.jobId, usage.c.attemptNo)
            )
        ).all()
    lines = _log_lines(logs)
    return [
        f"{job_id}: {[tuple(a[1:]) for a in attempts if a.jobId == job_id]} "
        f"{[line for line in lines if job_id in line]}"
        for job_id in retried
    ]


async def test_two_fleets_on_their_own_tokens_drain_on_first_attempts(
    mysql_url: str, start_scheduler: SchedulerFactory, launch: Launcher, tmp_path: Path
) -> None:
    scheduler = await start_scheduler(
        mysql_url,
        runtime_identities=",".join(f"{prefix}={token}" for prefix, token in FLEETS.items()),
        max_active_jobs_per_user=JOBS_TOTAL,
    )
    for prefix, token in FLEETS.items():
        for n in range(2):
            launch(scheduler, f"{prefix}{n}", AIJOB_RUNTIME_TOKEN=token, AIJOB_RUNTIME_SLOTS="8")
    misjudged_before = _misjudged()
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
    # No report or call was refused as another token's, and no lease ran out waiting for one.
    assert _misjudged() == misjudged_before, counts
    # All but at most one job on its first attempt.
    retried = await _retried_attempts(engine, tmp_path)
    assert counts.get(("succeeded", 1), 0) >= JOBS_TOTAL - 1, (counts, retried)
    async with engine.connect() as conn:
        holders = (await conn.execute(select(JOBS.c.lockedBy).distinct())).scalars().all()
    assert {h.rsplit("-", 1)[0] + "-" for h in holders if h} == set(FLEETS)

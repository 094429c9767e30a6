"""After a drain under faults: what the database says happened to every job and event."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select

from devtools.harness.waiting import eventually
from scheduler_service.sql.db.engine import create_engine
from tests.support.db_checks import ARTIFACTS, JOBS, OUTBOX


@dataclass(frozen=True)
class Ledger:
    statuses: dict[str, int]
    #: jobs with artifacts, artifact rows, artifacts whose attempt is not the job's last one
    jobs_with_artifacts: int
    artifact_rows: int
    artifacts_of_other_attempts: int
    events: dict[tuple[str, str], int]  # (eventType, status) -> count
    published_positions: int
    highest_position: int


async def read_ledger(url: str) -> Ledger:
    engine = create_engine(url, pool_size=2)
    try:
        async with engine.connect() as conn:
            statuses = select(JOBS.c.lifecycleStatus, func.count()).group_by(JOBS.c.lifecycleStatus)
            events = select(OUTBOX.c.eventType, OUTBOX.c.status, func.count()).group_by(
                OUTBOX.c.eventType, OUTBOX.c.status
            )
            other_attempts = (
                select(func.count())
                .select_from(ARTIFACTS.join(JOBS, JOBS.c.id == ARTIFACTS.c.jobId))
                .where(ARTIFACTS.c.attemptNo != JOBS.c.attemptCount)
            )
            positions = select(
                func.count(func.distinct(OUTBOX.c.publishedSeq)), func.max(OUTBOX.c.publishedSeq)
            )
            distinct_positions, highest = (await conn.execute(positions)).one()
            return Ledger(
                statuses={str(s): int(n) for s, n in (await conn.execute(statuses)).all()},
                jobs_with_artifacts=int(
                    (
                        await conn.execute(select(func.count(func.distinct(ARTIFACTS.c.jobId))))
                    ).scalar_one()
                ),
                artifact_rows=int(
                    (await conn.execute(select(func.count()).select_from(ARTIFACTS))).scalar_one()
                ),
                artifacts_of_other_attempts=int((await conn.execute(other_attempts)).scalar_one()),
                events={(str(t), str(s)): int(n) for t, s, n in (await conn.execute(events)).all()},
                published_positions=int(distinct_positions),
                highest_position=int(highest or 0),
            )
    finally:
        await engine.dispose()


def assert_every_job_once(ledger: Ledger, jobs: int) -> None:
    """Every job succeeded with one artifact set from its last attempt, and every event of
    every job was published once, at its own position, with no gap."""
    assert ledger.statuses == {"succeeded": jobs}, ledger.statuses
    assert ledger.jobs_with_artifacts == ledger.artifact_rows == jobs
    assert ledger.artifacts_of_other_attempts == 0
    assert ledger.events == {
        ("ai.job.enqueue", "published"): jobs,
        ("ai.job.completed", "published"): jobs,
    }, ledger.events
    assert ledger.published_positions == ledger.highest_position == 2 * jobs


async def succeeded_count(url: str) -> int:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            query = select(func.count()).where(JOBS.c.lifecycleStatus == "succeeded")
            return int((await conn.execute(query)).scalar_one())
    finally:
        await engine.dispose()


async def wait_until_succeeded(url: str, at_least: int, within_s: float = 240) -> None:
    async def reached() -> bool:
        return await succeeded_count(url) >= at_least

    await eventually(reached, within_s=within_s, every_s=0.2)


async def wait_until_published(url: str, events: int, within_s: float = 120) -> None:
    """Until ``events`` outbox events are published (the dispatcher runs behind the jobs)."""

    async def settled() -> bool:
        ledger = await read_ledger(url)
        return sum(n for (_, status), n in ledger.events.items() if status == "published") == events

    await eventually(settled, within_s=within_s, every_s=0.2)

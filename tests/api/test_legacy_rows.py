"""Legacy rows of job types this engine does not run (issue 15): a legacy ``pending`` row became
``queued`` for ever (no runtime may subscribe to its type), counted against its user's cap and
pinned the oldest-queued gauge; a legacy ``processing`` row was reaped as "attempt 0" and then
sat queued too. On first sight — the reaper's first sweep after a start — such jobs fail with
JOB_TYPE_UNKNOWN and an ``ai.job.failed`` event, and stop counting anywhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import text

from devtools.harness.runtime_client import JobClient
from scheduler_service.db.engine import create_engine
from scheduler_service.jobs.stats import queue_stats
from scheduler_service.migrate import migrate
from tests.conftest import DatabaseFactory
from tests.support.db_checks import events, job_row
from tests.support.schedulers import SchedulerFactory

pytestmark = pytest.mark.mysql

LEGACY_SQL = Path(__file__).resolve().parent.parent / "fixtures" / "legacy-schema.sql"
STRANDED = {"legacy-05": "queued", "legacy-06": "running", "legacy-09": "queued"}


async def _legacy_database(mysql_database: DatabaseFactory) -> str:
    url = await mysql_database()
    body = re.sub(r"^--.*$", "", LEGACY_SQL.read_text(), flags=re.MULTILINE)
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn:
            for statement in (s.strip() for s in body.split(";")):
                if statement:
                    await conn.execute(text(statement))
    finally:
        await engine.dispose()
    await migrate(url)
    return url


async def test_stranded_legacy_jobs_fail_on_first_sight_and_stop_counting(
    mysql_database: DatabaseFactory, start_scheduler: SchedulerFactory
) -> None:
    url = await _legacy_database(mysql_database)
    scheduler = await start_scheduler(url, max_active_jobs_per_user=1, reaper_interval_s=3600)
    app = scheduler.app
    for job_id, status in STRANDED.items():
        assert (await job_row(app.engine, job_id))["lifecycleStatus"] == status
    assert await app.reaper.reap_once() == len(STRANDED)
    for job_id in STRANDED:
        row = await job_row(app.engine, job_id)
        assert (row["lifecycleStatus"], row["status"], row["errorCode"]) == (
            "failed",
            "failed",
            "JOB_TYPE_UNKNOWN",
        )
        assert row["finishedAt"] is not None
        assert await events(app.engine, job_id) == ["ai.job.failed"]
    # Finished legacy rows are untouched; the users' caps and the queue gauges are free again.
    assert (await job_row(app.engine, "legacy-01"))["lifecycleStatus"] == "succeeded"
    assert (await JobClient(scheduler.channel, "user-c").create()).lifecycle_status == "queued"
    stats = await queue_stats(app.uow)
    assert all(age < 3600 for age in stats.oldest_queued_s.values())
    assert await app.reaper.reap_once() == 0  # nothing left to retire

"""Group commit on MariaDB: the mixed batch answers each report as its unary call would, and a
batch of results is written with one statement per table, not one per job."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from devtools.harness.runtime_client import JobClient
from scheduler_service.core.usage import Usage
from scheduler_service.services.group_commit import GroupCommit
from scheduler_service.services.reports import ResultSubmission, SubmitOutcome
from scheduler_service.wiring.app import SchedulerApp
from shared.canonical_json import output_hash
from tests.support.db import shift_times
from tests.support.db_checks import ARTIFACTS, OUTBOX, USAGE, job_row
from tests.support.mixed_batch import run_mixed_batch
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql


@contextmanager
def statements(engine: AsyncEngine) -> Iterator[Counter[str]]:
    """Counts the statements this task runs on ``engine``, by verb and table (the scheduler's
    background loops share the engine and are not counted)."""
    seen: Counter[str] = Counter()
    mine = asyncio.current_task()

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if asyncio.current_task() is not mine:
            return
        table = re.search(r"\b(?:FROM|INTO|UPDATE)\s+`?(\w+)", statement, re.IGNORECASE)
        seen[f"{statement.split(maxsplit=1)[0].upper()} {table.group(1) if table else ''}"] += 1

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)


async def test_a_mixed_batch_answers_each_report_and_writes_only_the_good_one(
    scheduler: RunningScheduler,
) -> None:
    app = scheduler.app
    await app.dispatcher.stop()  # the test leases by hand

    async def advance(job_id: str) -> None:
        await shift_times(app.engine, job_id, availableAt=-3_600)

    leases = await run_mixed_batch(app.jobs, app.runtime, _group_commit(app), advance)
    assert (await job_row(app.engine, leases["good"].job_id))["lifecycleStatus"] == "succeeded"
    for role in ("stale", "hashed", "other", "beat"):
        assert (await job_row(app.engine, leases[role].job_id))["lifecycleStatus"] == "running"
    assert (await job_row(app.engine, leases["beat"].job_id))["progress"] == 40
    async with app.engine.connect() as conn:
        written = (await conn.execute(select(ARTIFACTS.c.jobId).distinct())).scalars().all()
        completed = (
            (
                await conn.execute(
                    select(OUTBOX.c.aggregateId).where(OUTBOX.c.eventType == "ai.job.completed")
                )
            )
            .scalars()
            .all()
        )
    assert list(written) == [leases["good"].job_id] == list(completed)


async def test_a_batch_of_results_is_one_statement_per_table(scheduler: RunningScheduler) -> None:
    app = scheduler.app
    await app.dispatcher.stop()
    jobs = JobClient(scheduler.channel)
    for _ in range(20):
        await jobs.create()
    leases = await app.leasing.claim("rt-1", ["synthetic_echo"], 20)
    assert len(leases) == 20
    output = {"echo": {"text": "hello"}}
    usage = Usage("scripted", 10, 5, 3, 0)
    reports = [
        ResultSubmission(
            lease.job_id,
            1,
            "rt-1",
            output_hash(output),
            json.dumps(output),
            usage,
            lease.lease_token,
        )
        for lease in leases
    ]
    with statements(app.engine) as seen:
        answers = await _group_commit(app).apply(reports)
    assert all(isinstance(a, SubmitOutcome) and not a.duplicate for a in answers)
    assert seen["UPDATE AiAnalysisJob"] == 1
    assert seen["INSERT AiJobArtifact"] == 1
    assert seen["INSERT AiUsageLog"] == 1
    assert seen["INSERT OutboxEvent"] == 1
    assert seen["SELECT AiAnalysisJob"] == 1  # the locked read
    async with app.engine.connect() as conn:
        assert (await conn.execute(select(func.count()).select_from(USAGE))).scalar_one() == 20
        assert (await conn.execute(select(func.count()).select_from(ARTIFACTS))).scalar_one() == 20


def _group_commit(app: SchedulerApp) -> GroupCommit:
    return GroupCommit(
        app.settlement,
        app.uow,
        app.registry,
        app.settings.flow,
        chunks_per_attempt=1_000,
        max_output_bytes=64 * 1024,
    )

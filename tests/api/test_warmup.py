"""Warm before fan-out, on MariaDB and SQLite over real gRPC: a user's jobs over one long
snapshot wait for the first of them to get its first token (the provider has then stored the
shared prefix), and go at once when it does; a job that asked for IMMEDIATE, or one whose
snapshot is short, does not wait (core/warmup.py)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from devtools.harness.runtime_client import ClientRuntime, JobClient
from scheduler_service.sql.db.clock import db_now
from shared.gen.aijob.v1 import types_pb2
from tests.conftest import DatabaseFactory
from tests.support.db_checks import JOBS
from tests.support.schedulers import RunningScheduler, SchedulerFactory
from tests.support.schema_copy import migrated

LONG: dict[str, Any] = {
    "learner": {"id": "learner-1"},
    "material": {"id": "m-1", "title": "Cells", "content": "Mitochondria make ATP. " * 400},
}


async def _held(scheduler: RunningScheduler, job_ids: list[str]) -> set[str]:
    async with scheduler.app.engine.connect() as conn:
        rows = await conn.execute(
            select(JOBS.c.id).where(JOBS.c.id.in_(job_ids), JOBS.c.availableAt > db_now())
        )
        return set(rows.scalars())


async def test_jobs_over_one_long_snapshot_wait_for_the_first_ones_first_token(
    database: DatabaseFactory, start_scheduler: SchedulerFactory
) -> None:
    url = await database()
    await migrated(url)
    # A bound no test outlasts: only the first token lets the others go.
    scheduler = await start_scheduler(url, warmup_s=60)
    jobs = JobClient(scheduler.channel)
    types = ("weak_point_analysis", "learning_state_analysis", "next_action_planning")
    first, *others = [(await jobs.create(t, snapshot=LONG)).job_id for t in types]
    immediate = (
        await jobs.create(
            "flashcard_generation",
            snapshot=LONG,
            cost_policy=types_pb2.COST_POLICY_IMMEDIATE,
        )
    ).job_id
    short = (await jobs.create("weak_point_analysis", snapshot={"learner": {"id": "l"}})).job_id
    assert await _held(scheduler, [first, immediate, short, *others]) == set(others)
    runtime = ClientRuntime(
        scheduler.channel, "rt-warm", slots=8, job_types=[*types, "flashcard_generation"]
    )
    await runtime.connect()
    try:
        leases = {lease.job_id: lease for lease in [await runtime.next_lease() for _ in range(3)]}
        assert set(leases) == {first, immediate, short}
        await runtime.heartbeat(leases[first], 10, first_token=True)
        assert {(await runtime.next_lease()).job_id for _ in others} == set(others)
        # The prefix is warm now: a later job over the snapshot waits for nothing.
        later = (await jobs.create("weak_point_analysis", snapshot=LONG)).job_id
        assert await _held(scheduler, [later]) == set()
        assert (await runtime.next_lease()).job_id == later
    finally:
        await runtime.close()

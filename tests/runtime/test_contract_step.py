"""The contract step (M-AI-05 and M-AI-08): ``python -m scheduler_service contract``
refuses with each blocker named, and once the types are adopted and a quiet period has passed (a
clock the test sets) drops System A's columns, the triggers and System B's tables; the engine
then runs its whole job flow on the contracted schema."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from google.protobuf import struct_pb2
from sqlalchemy import text

from devtools.harness.runtime_client import JobClient
from devtools.harness.waiting import eventually
from scheduler_service.core.job_registry import default_registry
from scheduler_service.sql import job_statements as lifecycle_sql
from scheduler_service.sql.legacy_contract import contract
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc as admin_grpc
from tests.conftest import DatabaseFactory
from tests.runtime.conftest import RuntimeFactory
from tests.runtime.test_pipeline import SNAPSHOT
from tests.support.db import db_now_value
from tests.support.db_checks import job_row
from tests.support.legacy import legacy_database, run_sql, work
from tests.support.schedulers import RunningScheduler, SchedulerFactory

pytestmark = pytest.mark.mysql


@pytest.fixture
async def mysql_url(mysql_database: DatabaseFactory) -> AsyncIterator[str]:
    """The legacy database, with System B's table holding a row and a recent legacy write."""
    url = await legacy_database(mysql_database)
    await run_sql(url, "CREATE TABLE AiRuntimeJob (id VARCHAR(191) PRIMARY KEY)")
    await run_sql(url, "INSERT INTO AiRuntimeJob (id) VALUES ('b-1')")
    await work(url, "legacy-09", "processing")  # the old worker starts one (legacy-06 runs too)
    yield url
    # The shadow-write switch is process-wide: the next test's database is expanded again.
    lifecycle_sql.set_shadow_write(True)


async def _columns(url: str, scheduler: RunningScheduler) -> set[str]:
    async with scheduler.app.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS"
                " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'AiAnalysisJob'"
            )
        )
        return {name for (name,) in rows}


async def _triggers(scheduler: RunningScheduler) -> int:
    async with scheduler.app.engine.connect() as conn:
        found = await conn.execute(
            text(
                "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()"
            )
        )
        return int(found.scalar_one())


async def _every_type(*replicas: RunningScheduler) -> list[str]:
    """One job of every type, through the replicas in turn, each by a user of its own."""
    created = []
    answer = {"answerId": "a-1", "question": "What do cells do?", "answer": "Cells make energy"}
    for index, job_type in enumerate(default_registry().job_types()):
        params = struct_pb2.Struct()
        if job_type in ("quiz_generation", "flashcard_generation"):
            params.update({"count": 3})
        snapshot = (
            answer
            if job_type in ("active-recall", "feynman-evaluation")
            else {"text": "hi"}
            if job_type == "synthetic_echo"
            else SNAPSHOT
        )
        jobs = JobClient(replicas[index % len(replicas)].channel, f"user-after-{index}")
        created.append((await jobs.create(job_type, snapshot=snapshot, params=params)).job_id)
    return created


async def test_contract_refuses_each_blocker_then_the_engine_runs_on_the_contracted_schema(
    scheduler: RunningScheduler,
    runtimes: RuntimeFactory,
    start_scheduler: SchedulerFactory,
    mysql_url: str,
) -> None:
    code, lines = await contract(mysql_url, check=True)
    report = "\n".join(lines)
    assert code == 1
    for blocker in (
        "'active-recall' is still owned by System A",
        "'feynman-evaluation' is still owned by System A",
        "legacy code wrote a job row",
        "2 job rows are being run by the legacy worker",
        "1 legacy pending rows are not taken in yet",
        "table AiRuntimeJob holds 1 rows",
    ):
        assert blocker in report
    assert (await contract(mysql_url, check=False))[0] == 1  # refused: nothing dropped
    assert "status" in await _columns(mysql_url, scheduler)

    # Adopt both types (the fixture's pending rows name no answer: they fail), let the old
    # worker finish, empty System B's table.
    admin = admin_grpc.AdminServiceStub(scheduler.channel)
    for job_type in ("active-recall", "feynman-evaluation"):
        await admin.AdoptLegacyJobs(admin_pb.AdoptLegacyJobsRequest(job_type=job_type))
    await work(mysql_url, "legacy-06", "completed")
    await work(mysql_url, "legacy-09", "failed")
    await run_sql(mysql_url, "DELETE FROM AiRuntimeJob")
    code, lines = await contract(mysql_url, check=True)
    assert code == 1 and len(lines) == 2 and "legacy code wrote a job row" in lines[1]

    # A week and a day later, by the test's clock: nothing blocks it.
    # This replica's sweeps stop here, so that only its writes can notice the contract.
    for loop in scheduler.app.loops:
        if loop.name == "reaper":
            await loop.stop()
    later = await db_now_value(scheduler.app.engine) + timedelta(days=8)
    assert await contract(mysql_url, check=True, as_of=later) == (
        0,
        ["nothing blocks the contract step"],
    )
    code, lines = await contract(mysql_url, check=False, as_of=later)
    assert code == 0
    assert "  - column AiAnalysisJob.status" in lines and "  - table AiRuntimeJob" in lines
    assert not {"status", "sessionId", "answerId"} & await _columns(mysql_url, scheduler)
    assert await _triggers(scheduler) == 0
    assert (await contract(mysql_url, check=True))[1] == [
        "already contracted: the legacy columns are gone"
    ]

    # A replica that has not noticed yet: its first write finds the column gone, stops writing
    # it and runs again; the next sweep would have noticed too.
    assert lifecycle_sql.shadow_write()
    noticed_by_write = await JobClient(scheduler.channel, "user-after").create()
    assert not lifecycle_sql.shadow_write()
    lifecycle_sql.set_shadow_write(True)
    assert await scheduler.app.legacy.take_in_recent() == 0
    assert not lifecycle_sql.shadow_write()

    # The job flow on the contracted schema: creates, runs, a cancel and a retry, on this
    # replica and on one started afresh.
    fresh = await start_scheduler(mysql_url)
    cancelled = await JobClient(fresh.channel, "user-after").create()
    outcome = await JobClient(fresh.channel, "user-after").cancel(cancelled.job_id)
    assert outcome.job.lifecycle_status == "cancelled"
    runtimes("rt-contracted")
    created = [noticed_by_write.job_id, *await _every_type(scheduler, fresh)]

    async def all_succeeded() -> bool:
        rows = [await job_row(fresh.app.engine, job_id) for job_id in created]
        return all(row["lifecycleStatus"] == "succeeded" for row in rows)

    await eventually(all_succeeded)
    retried = await admin_grpc.AdminServiceStub(fresh.channel).RetryJob(
        admin_pb.RetryJobRequest(job_id=cancelled.job_id)
    )
    assert retried.retried_from_job_id == cancelled.job_id

    async def retry_succeeded() -> bool:
        row = await job_row(fresh.app.engine, retried.job_id)
        return bool(row["lifecycleStatus"] == "succeeded")

    await eventually(retry_succeeded)

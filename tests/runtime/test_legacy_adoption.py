"""Adopting System A's job types (M-AI-04) on a database upgraded from its table, with
the real scheduler, a real runtime and the scripted model.

After ``AdoptLegacyJobs``, a runtime runs a legacy ``pending`` row to ``succeeded`` with one
``AiAnalysisResult`` row; a row the legacy worker is running is left to it; rows whose answer is
missing fail LEGACY_ANSWER_NOT_FOUND; ``dry_run`` writes nothing; rows System A's producer inserts
afterwards are taken in too."""

from __future__ import annotations

from typing import Any, cast

import grpc
import pytest
from sqlalchemy import Table, select
from sqlalchemy.ext.asyncio import AsyncEngine

from devtools.harness.waiting import eventually
from scheduler_service.sql.db.legacy_models import AiAnalysisResult, AiLegacyJobType
from scheduler_service.sql.db.models import AiJob, OutboxEvent
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc as admin_grpc
from shared.status_details import error_reason
from tests.conftest import DatabaseFactory
from tests.runtime.conftest import RuntimeFactory
from tests.support.db_checks import events, job_row
from tests.support.legacy import ANSWERS_TABLE, legacy_database, produce, run_sql, work
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql

_results = cast(Table, AiAnalysisResult.__table__)


@pytest.fixture
async def mysql_url(mysql_database: DatabaseFactory) -> str:
    """The legacy database with answers, a recall row to run, one the old worker runs, and a
    Feynman row that stays System A's."""
    url = await legacy_database(mysql_database)
    await run_sql(url, ANSWERS_TABLE)
    for answer_id, user, text in [
        ("ans-f1", "user-f", "Mitochondria make ATP through cellular respiration in the cell"),
        ("ans-f2", "user-f", "Photosynthesis turns light into chemical energy"),
        ("ans-g1", "user-g", "Entropy measures how many microstates fit a macrostate"),
    ]:
        await run_sql(
            url,
            "INSERT INTO LearnerAnswer (id, userId, question, answer) VALUES (:id, :u, 'Q?', :a)",
            id=answer_id,
            u=user,
            a=text,
        )
    await produce(url, "recall-1", "user-f", "active-recall", answerId="ans-f1")
    await produce(url, "recall-busy", "user-f", "active-recall", answerId="ans-f2")
    await work(url, "recall-busy", "processing")
    await produce(url, "feynman-1", "user-g", "feynman-evaluation", answerId="ans-g1")
    return url


def _admin(scheduler: RunningScheduler) -> Any:  # the async stub is untyped
    return admin_grpc.AdminServiceStub(scheduler.channel)


async def _everything(engine: AsyncEngine) -> list[Any]:
    async with engine.connect() as conn:
        tables = [AiJob.__table__, OutboxEvent.__table__, AiLegacyJobType.__table__, _results]
        return [
            sorted(map(tuple, (await conn.execute(select(cast(Table, t)))).all()), key=str)
            for t in tables
        ]


async def test_dry_run_counts_and_writes_nothing(scheduler: RunningScheduler) -> None:
    before = await _everything(scheduler.app.engine)
    reply = await _admin(scheduler).AdoptLegacyJobs(
        admin_pb.AdoptLegacyJobsRequest(job_type="active-recall", dry_run=True)
    )
    # recall-1 has its answer (the fixture's pending rows legacy-05 and -09 name none).
    assert (reply.adopted, reply.left_to_legacy) == (1, 1)
    assert await _everything(scheduler.app.engine) == before


async def test_other_types_are_refused(scheduler: RunningScheduler) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _admin(scheduler).AdoptLegacyJobs(
            admin_pb.AdoptLegacyJobsRequest(job_type="quiz_generation")
        )
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error_reason(refused.value) == "JOB_TYPE_UNKNOWN"


async def test_an_adopted_row_runs_to_one_legacy_result_and_the_busy_one_is_left(
    scheduler: RunningScheduler, runtimes: RuntimeFactory, mysql_url: str
) -> None:
    engine = scheduler.app.engine
    runtimes("rt-legacy")
    reply = await _admin(scheduler).AdoptLegacyJobs(
        admin_pb.AdoptLegacyJobsRequest(job_type="active-recall")
    )
    assert (reply.adopted, reply.left_to_legacy) == (1, 1)

    async def succeeded() -> bool:
        return bool((await job_row(engine, "recall-1"))["lifecycleStatus"] == "succeeded")

    await eventually(succeeded, within_s=60)
    row = await job_row(engine, "recall-1")
    assert (row["status"], row["queueName"], row["maxAttempts"], row["timeoutMs"]) == (
        "completed",
        "ai-analysis",
        3,
        30_000,
    )
    assert await events(engine, "recall-1") == ["ai.job.enqueue", "ai.job.completed"]
    async with engine.connect() as conn:
        results = (await conn.execute(select(_results))).mappings().all()
    assert [(r["jobId"], r["answerId"], r["analysisType"]) for r in results] == [
        ("recall-1", "ans-f1", "active-recall")
    ]
    assert results[0]["score"] == results[0]["result"]["score"]

    # The fixture's pending rows name no answer: failed, with their event.
    for job_id in ("legacy-05", "legacy-09"):
        failed = await job_row(engine, job_id)
        assert (failed["lifecycleStatus"], failed["errorCode"]) == (
            "failed",
            "LEGACY_ANSWER_NOT_FOUND",
        )
        assert await events(engine, job_id) == ["ai.job.failed"]

    # The row the old worker runs is its own: sweeps pass over it until it completes there.
    for _ in range(3):
        assert await scheduler.app.reaper.reap_once() == 0
    busy = await job_row(engine, "recall-busy")
    assert (busy["lifecycleStatus"], busy["lockedBy"], busy["promptVersion"]) == (
        "running",
        None,
        None,
    )
    await work(mysql_url, "recall-busy", "completed")
    assert (await job_row(engine, "recall-busy"))["lifecycleStatus"] == "succeeded"

    # Feynman is still System A's: untouched.
    feynman = await job_row(engine, "feynman-1")
    assert (feynman["lifecycleStatus"], feynman["promptVersion"]) == ("queued", None)

    # System A's producer keeps inserting rows of the adopted type: the intake takes them in.
    await produce(mysql_url, "recall-late", "user-f", "active-recall", answerId="ans-f2")

    async def late_done() -> bool:
        return bool((await job_row(engine, "recall-late"))["lifecycleStatus"] == "succeeded")

    await eventually(late_done, within_s=60)
    # Adopting again finds nothing left to adopt.
    again = await _admin(scheduler).AdoptLegacyJobs(
        admin_pb.AdoptLegacyJobsRequest(job_type="active-recall")
    )
    assert (again.adopted, again.left_to_legacy) == (0, 0)

"""Legacy rows beside the engine (issues 15 and 29).

Rows of the types System A still owns (``AiLegacyJobType``, seeded with ``active-recall`` and
``feynman-evaluation``) are the legacy worker's: the engine reads them but never reaps, fails or
counts them, however many sweeps pass, while the worker takes them through ``processing`` to
``completed`` (and the two-way shadow write moves their ``lifecycleStatus`` along). Rows of a type
that is neither registered nor owned — a retired definition — still fail on first sight with
JOB_TYPE_UNKNOWN and an ``ai.job.failed`` event, and stop counting anywhere."""

from __future__ import annotations

import grpc
import pytest

from devtools.harness.runtime_client import ClientRuntime, JobClient
from scheduler_service.sql.job_stats import queue_stats
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.status_details import error_reason
from tests.conftest import DatabaseFactory
from tests.support.db_checks import events, job_row
from tests.support.legacy import legacy_database, run_sql, work
from tests.support.schedulers import SchedulerFactory

pytestmark = pytest.mark.mysql

#: The fixture's unfinished rows, all of owned types, as the upgrade maps them.
OWNED = {"legacy-05": "queued", "legacy-06": "running", "legacy-09": "queued"}
#: Rows of a retired type (neither registered nor owned), written after the upgrade.
RETIRED = {"retired-1": "pending", "retired-2": "processing"}


async def _legacy_database(mysql_database: DatabaseFactory) -> str:
    url = await legacy_database(mysql_database)
    for job_id, status in RETIRED.items():
        await run_sql(
            url,
            "INSERT INTO AiAnalysisJob (id, userId, jobType, status, progress, startedAt,"
            " createdAt, updatedAt) VALUES (:id, 'user-r', 'retired-type', :status, 0,"
            " '2026-06-18 00:00:00', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))",
            id=job_id,
            status=status,
        )
    return url


async def test_owned_rows_are_left_to_the_legacy_worker_and_retired_types_fail(
    mysql_database: DatabaseFactory, start_scheduler: SchedulerFactory
) -> None:
    url = await _legacy_database(mysql_database)
    scheduler = await start_scheduler(url, max_active_jobs_per_user=1, reaper_interval_s=3600)
    app = scheduler.app
    for job_id, status in OWNED.items():
        assert (await job_row(app.engine, job_id))["lifecycleStatus"] == status

    # The first sweep retires the retired type's rows, and only those.
    assert await app.reaper.reap_once() == len(RETIRED)
    for job_id in RETIRED:
        row = await job_row(app.engine, job_id)
        assert (row["lifecycleStatus"], row["status"], row["errorCode"]) == (
            "failed",
            "failed",
            "JOB_TYPE_UNKNOWN",
        )
        assert row["finishedAt"] is not None
        assert await events(app.engine, job_id) == ["ai.job.failed"]

    # The legacy worker runs its pending row while ten more sweeps pass over it.
    for status, sweeps in [("processing", 5), ("completed", 5)]:
        await work(url, "legacy-05", status)
        for _ in range(sweeps):
            assert await app.reaper.reap_once() == 0
    row = await job_row(app.engine, "legacy-05")
    assert (row["lifecycleStatus"], row["status"], row["errorCode"]) == (
        "succeeded",
        "completed",
        None,
    )
    for job_id, status in {"legacy-06": "running", "legacy-09": "queued"}.items():
        row = await job_row(app.engine, job_id)
        assert (row["lifecycleStatus"], row["errorCode"]) == (status, None)
        assert await events(app.engine, job_id) == []

    # A poll-then-lock client cannot take one either.
    runtime = ClientRuntime(scheduler.channel, "rt-lock")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await runtime.stub.Lock(
            rt.LockRequest(job_id="legacy-09", runtime_instance_id="rt-lock"),
            metadata=runtime.metadata,
        )
    assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(refused.value) == "JOB_TYPE_UNKNOWN"

    # Cancelling all of a user's jobs leaves System A's rows to it.
    assert await app.jobs.cancel_user_jobs("user-e") == (0, 0)
    assert (await job_row(app.engine, "legacy-09"))["lifecycleStatus"] == "queued"

    # Owned rows count against nobody's cap (user-c holds legacy-06, cap 1) nor in the gauges.
    assert (await JobClient(scheduler.channel, "user-c").create()).lifecycle_status == "queued"
    assert (await JobClient(scheduler.channel, "user-e").create()).lifecycle_status == "queued"
    stats = await queue_stats(app.uow)
    assert not any(
        job_type in {"active-recall", "feynman-evaluation"} for _, job_type, _, _ in stats.depths
    )
    assert all(age < 3600 for age in stats.oldest_queued_s.values())

"""JobService.CreateJobs on real MariaDB over real gRPC: up to 500 jobs per call, each
answered as its own CreateJob would be, the good ones committed together."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from devtools.harness.runtime_client import ClientRuntime, JobClient
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.status_details import error_reason, status_reason
from tests.support.db_checks import JOBS, OUTBOX, SNAPSHOTS, count
from tests.support.schedulers import RunningScheduler, SchedulerFactory

pytestmark = pytest.mark.mysql

OK = 0


def _item(user: str = "", job_type: str = "synthetic_echo", **fields: Any) -> job_pb.CreateJobsItem:
    snapshot = fields.pop("snapshot", {"text": "hello"})
    job = job_pb.CreateJobRequest(job_type=job_type, **fields)
    json_format.ParseDict(snapshot, job.snapshot)
    return job_pb.CreateJobsItem(user_id=user, job=job)


def _reason(result: job_pb.CreateJobsResult) -> str:
    return status_reason(result.status)


async def _create_jobs(
    scheduler: RunningScheduler, items: list[job_pb.CreateJobsItem], user: str = "caller"
) -> list[job_pb.CreateJobsResult]:
    jobs = JobClient(scheduler.channel, user)
    reply = await jobs.stub.CreateJobs(
        job_pb.CreateJobsRequest(items=items), metadata=jobs.metadata, timeout=60
    )
    assert len(reply.results) == len(items)
    return list(reply.results)


async def test_a_500_item_call_with_3_bad_items_creates_497_and_explains_3(
    scheduler: RunningScheduler,
) -> None:
    items = [_item(f"learner-{i % 50}", snapshot={"text": f"n{i}"}) for i in range(500)]
    items[7] = _item("learner-7", job_type="no_such_type")
    items[250] = _item("learner-0", job_type="quiz_generation", snapshot={"learner": {}})
    items[499] = _item("bad user")
    results = await _create_jobs(scheduler, items)
    bad = {i: r for i, r in enumerate(results) if r.status.code != OK}
    assert set(bad) == {7, 250, 499}
    assert [(r.status.code, _reason(r)) for r in bad.values()] == [
        (grpc.StatusCode.INVALID_ARGUMENT.value[0], "INVALID_ARGUMENT"),
        (grpc.StatusCode.INVALID_ARGUMENT.value[0], "INVALID_SNAPSHOT"),
        (grpc.StatusCode.INVALID_ARGUMENT.value[0], "INVALID_ARGUMENT"),
    ]
    assert "snapshot.learner.id" in bad[250].status.message
    good = [r for i, r in enumerate(results) if i not in bad]
    assert all(r.created and r.job.lifecycle_status == "queued" for r in good)
    assert len({r.job.job_id for r in good}) == 497
    assert [r.job.user_id for r in good[:3]] == ["learner-0", "learner-1", "learner-2"]
    engine = scheduler.app.engine
    assert await count(engine, JOBS) == await count(engine, SNAPSHOTS) == 497
    assert await count(engine, OUTBOX, eventType="ai.job.enqueue") == 497
    # Each job reads back as its owner's, exactly as a CreateJob's would.
    fetched = await JobClient(scheduler.channel, "learner-3").get(good[3].job.job_id)
    assert (fetched.user_id, fetched.job_type) == ("learner-3", "synthetic_echo")


async def test_idempotency_keys_hold_within_a_call_and_across_calls(
    scheduler: RunningScheduler,
) -> None:
    first = await JobClient(scheduler.channel, "u-1").create(idempotency_key="k-old")
    results = await _create_jobs(
        scheduler,
        [
            _item("u-1", idempotency_key="k-old"),  # made by an earlier call
            _item("u-1", idempotency_key="k-new"),
            _item("u-1", idempotency_key="k-new"),  # a repeat within the call
            _item("u-1", idempotency_key="k-new", snapshot={"text": "different"}),
            _item("u-2", idempotency_key="k-new"),  # another user's key is its own
        ],
        user="u-1",
    )
    assert (results[0].job.job_id, results[0].created) == (first.job_id, False)
    assert results[1].created and not results[2].created
    assert results[2].job.job_id == results[1].job.job_id
    assert (results[3].status.code, _reason(results[3])) == (
        grpc.StatusCode.ALREADY_EXISTS.value[0],
        "IDEMPOTENCY_KEY_REUSED",
    )
    assert results[4].created and results[4].job.job_id != results[1].job.job_id
    assert await count(scheduler.app.engine, JOBS) == 3


async def test_each_users_cap_holds_item_by_item(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, max_active_jobs_per_user=2)
    await JobClient(scheduler.channel, "capped").create()
    results = await _create_jobs(
        scheduler, [_item("capped"), _item("capped"), _item("free"), _item("capped")]
    )
    codes = [(r.status.code, _reason(r)) for r in results]
    too_many = (grpc.StatusCode.RESOURCE_EXHAUSTED.value[0], "TOO_MANY_JOBS")
    assert codes == [(OK, ""), too_many, (OK, ""), too_many]


async def test_calls_over_500_items_or_without_a_user_are_refused(
    scheduler: RunningScheduler,
) -> None:
    jobs = JobClient(scheduler.channel, "caller")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await jobs.stub.CreateJobs(
            job_pb.CreateJobsRequest(items=[_item() for _ in range(501)]), metadata=jobs.metadata
        )
    assert (refused.value.code(), error_reason(refused.value)) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_ARGUMENT",
    )
    no_caller = await jobs.stub.CreateJobs(
        job_pb.CreateJobsRequest(items=[_item(), _item("named")]), metadata=jobs.metadata[1:]
    )
    assert no_caller.results[0].status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert no_caller.results[1].created
    assert await count(scheduler.app.engine, JOBS) == 1


async def test_runtimes_get_a_bulk_create_at_once(scheduler: RunningScheduler) -> None:
    runtime = ClientRuntime(scheduler.channel, "rt-bulk", slots=8)
    await runtime.connect()
    try:
        results = await _create_jobs(scheduler, [_item(f"user-{i}") for i in range(8)])
        created = {r.job.job_id for r in results}
        assert {(await runtime.next_lease()).job_id for _ in range(8)} == created
    finally:
        await runtime.close()

"""JobService and AdminService on real MariaDB over real gRPC: idempotency, isolation between
users, limits, listing, watching, admin retry, stats and bulk cancel."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.status_details import error_reason
from tests.support.schedulers import RunningScheduler, SchedulerFactory

pytestmark = pytest.mark.mysql

ECHO = {"text": "hello"}
LEARNING = {"learner": {"id": "l-1"}, "material": {"id": "m-1", "title": "Cells"}}


async def _error(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


def _admin(scheduler: RunningScheduler) -> admin_service_pb2_grpc.AdminServiceAsyncStub:
    return admin_service_pb2_grpc.AdminServiceStub(scheduler.channel)


async def test_concurrent_creates_with_one_key_give_one_job(scheduler: RunningScheduler) -> None:
    jobs = JobClient(scheduler.channel)
    request = job_pb.CreateJobRequest(job_type="synthetic_echo", idempotency_key="key-1")
    json_format.ParseDict(ECHO, request.snapshot)
    replies = await asyncio.gather(
        *(jobs.stub.CreateJob(request, metadata=jobs.metadata) for _ in range(20))
    )
    assert len({r.job.job_id for r in replies}) == 1
    assert sum(r.created for r in replies) == 1
    again = await jobs.stub.CreateJob(request, metadata=jobs.metadata)
    assert (again.job.job_id, again.created) == (replies[0].job.job_id, False)
    # Same key, different request: refused, not silently matched.
    other = job_pb.CreateJobRequest(job_type="synthetic_echo", idempotency_key="key-1")
    json_format.ParseDict({"text": "different"}, other.snapshot)
    error = await _error(jobs.stub.CreateJob(other, metadata=jobs.metadata))
    assert (error.code(), error_reason(error)) == (
        grpc.StatusCode.ALREADY_EXISTS,
        "IDEMPOTENCY_KEY_REUSED",
    )
    # The key is per user: another user may use it for their own job.
    theirs = await JobClient(scheduler.channel, "user-2").stub.CreateJob(
        request, metadata=JobClient(scheduler.channel, "user-2").metadata
    )
    assert theirs.created and theirs.job.job_id != replies[0].job.job_id


async def test_bad_input_names_the_failing_field(scheduler: RunningScheduler) -> None:
    jobs = JobClient(scheduler.channel)
    cases: list[tuple[str, dict[str, Any], dict[str, Any], str, str]] = [
        ("quiz_generation", {"learner": {}}, {}, "INVALID_SNAPSHOT", "snapshot.learner.id"),
        ("quiz_generation", LEARNING, {"count": 500}, "INVALID_PARAMS", "params.count"),
        ("quiz_generation", LEARNING, {"colour": "red"}, "INVALID_PARAMS", "params.colour"),
        ("no_such_type", ECHO, {}, "INVALID_ARGUMENT", "job_type"),
        ("", ECHO, {}, "INVALID_ARGUMENT", "job_type is required"),
    ]
    for job_type, snapshot, params, reason, field in cases:
        request = job_pb.CreateJobRequest(job_type=job_type)
        json_format.ParseDict(snapshot, request.snapshot)
        json_format.ParseDict(params, request.params)
        error = await _error(jobs.stub.CreateJob(request, metadata=jobs.metadata))
        assert (error.code(), error_reason(error)) == (grpc.StatusCode.INVALID_ARGUMENT, reason)
        assert field in (error.details() or "")
    no_user = job_pb.CreateJobRequest(job_type="synthetic_echo")
    error = await _error(jobs.stub.CreateJob(no_user, metadata=jobs.metadata[1:]))
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT and "x-user-id" in (
        error.details() or ""
    )
    assert await _count_jobs(scheduler) == 0


async def _count_jobs(scheduler: RunningScheduler) -> int:
    reply = await _admin(scheduler).ListJobs(admin_pb.AdminListJobsRequest(page_size=200))
    return len(reply.jobs)


async def test_another_users_job_is_not_found_exactly_like_a_missing_one(
    scheduler: RunningScheduler,
) -> None:
    owner, intruder = (
        JobClient(scheduler.channel, "owner"),
        JobClient(scheduler.channel, "intruder"),
    )
    job = await owner.create()
    missing = "01a2b3c4-0000-7000-8000-000000000000"
    for job_id in (job.job_id, missing):
        for call in (
            intruder.get(job_id),
            intruder.cancel(job_id),
            _first(
                intruder.stub.WatchJob(
                    job_pb.WatchJobRequest(job_id=job_id), metadata=intruder.metadata
                )
            ),
        ):
            error = await _error(call)
            assert (error.code(), error_reason(error)) == (
                grpc.StatusCode.NOT_FOUND,
                "JOB_NOT_FOUND",
            )
            assert error.details() == f"job {job_id!r} not found"
    assert (
        await owner.get(job.job_id)
    ).lifecycle_status == "queued"  # the intruder changed nothing
    listed = await intruder.stub.ListJobs(job_pb.ListJobsRequest(), metadata=intruder.metadata)
    assert list(listed.jobs) == []


async def _first(call: Any) -> Any:
    async for item in call:
        return item
    return None


async def test_active_cap_holds_under_concurrent_creates(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, max_active_jobs_per_user=3)
    jobs = JobClient(scheduler.channel)
    results = await asyncio.gather(*(jobs.create() for _ in range(10)), return_exceptions=True)
    created = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
    assert len(created) == 3 and len(refused) == 7
    assert {(e.code(), error_reason(e)) for e in refused} == {
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_JOBS")
    }
    await jobs.cancel(created[0].job_id)  # a slot frees up
    assert (await jobs.create()).lifecycle_status == "queued"
    assert (await JobClient(scheduler.channel, "user-2").create()).job_id  # per user


async def test_active_cap_holds_when_creates_race_in_separate_transactions(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    """Two replicas, each create its own transaction (no gathering): only the user's gate lock
    stands between them and the cap."""
    replicas = [
        await start_scheduler(mysql_url, max_active_jobs_per_user=3, create_batch_max=1)
        for _ in range(2)
    ]
    clients = [JobClient(replica.channel) for replica in replicas]
    results = await asyncio.gather(
        *(clients[i % 2].create() for i in range(12)), return_exceptions=True
    )
    created = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
    assert len(created) == 3 and len(refused) == 9
    assert {error_reason(e) for e in refused} == {"TOO_MANY_JOBS"}


async def test_daily_quota(mysql_url: str, start_scheduler: SchedulerFactory) -> None:
    scheduler = await start_scheduler(mysql_url, daily_job_quota_per_user=2)
    jobs = JobClient(scheduler.channel)
    for _ in range(2):
        await jobs.cancel((await jobs.create()).job_id)  # finished jobs still count for the day
    error = await _error(jobs.create())
    assert (error.code(), error_reason(error)) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "QUOTA_EXCEEDED",
    )


async def test_list_pages_through_own_jobs(scheduler: RunningScheduler) -> None:
    jobs = JobClient(scheduler.channel)
    created = [(await jobs.create(snapshot={"i": i})).job_id for i in range(7)]
    await JobClient(scheduler.channel, "someone-else").create()
    seen: list[str] = []
    token = ""
    sizes = []
    while True:
        page = await jobs.stub.ListJobs(
            job_pb.ListJobsRequest(page_size=3, page_token=token), metadata=jobs.metadata
        )
        sizes.append(len(page.jobs))
        seen += [j.job_id for j in page.jobs]
        token = page.next_page_token
        if not token:
            break
    assert sizes == [3, 3, 1]
    assert seen == list(reversed(created))  # newest first, each once
    first = await jobs.stub.ListJobs(job_pb.ListJobsRequest(page_size=3), metadata=jobs.metadata)
    token = first.next_page_token
    # The last digit changed to one it is not (a fixed "0" would change nothing once in 16).
    edited = token[:-1] + ("1" if token[-1] == "0" else "0")
    for bad in (edited, "garbage", token + "x"):
        error = await _error(
            jobs.stub.ListJobs(job_pb.ListJobsRequest(page_token=bad), metadata=jobs.metadata)
        )
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    # A token is bound to its filters.
    error = await _error(
        jobs.stub.ListJobs(
            job_pb.ListJobsRequest(page_token=first.next_page_token, lifecycle_status="queued"),
            metadata=jobs.metadata,
        )
    )
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    huge = await jobs.stub.ListJobs(job_pb.ListJobsRequest(page_size=10**9), metadata=jobs.metadata)
    assert len(huge.jobs) == 7
    queued = await jobs.stub.ListJobs(
        job_pb.ListJobsRequest(lifecycle_status="queued", job_type="synthetic_echo"),
        metadata=jobs.metadata,
    )
    assert len(queued.jobs) == 7


async def test_watch_streams_changes_until_terminal(scheduler: RunningScheduler) -> None:
    jobs = JobClient(scheduler.channel)
    job = await jobs.create()
    call = jobs.stub.WatchJob(job_pb.WatchJobRequest(job_id=job.job_id), metadata=jobs.metadata)
    updates = call.__aiter__()
    first = await updates.__anext__()
    assert first.lifecycle_status == "queued"
    runtime = ClientRuntime(scheduler.channel, "rt-w", slots=1)
    await runtime.connect()
    try:
        lease = await runtime.next_lease()
        assert (await updates.__anext__()).lifecycle_status == "running"
        await runtime.heartbeat(lease, progress=40)
        assert (await updates.__anext__()).progress == 40
        await runtime.submit(lease, echo_output(lease))
        final = await updates.__anext__()
        assert final.lifecycle_status == "succeeded" and final.result.artifact_count == 1
        with pytest.raises(StopAsyncIteration):
            await updates.__anext__()
    finally:
        await runtime.close()
    # A terminal job: one message, then the stream ends.
    done = [
        j
        async for j in jobs.stub.WatchJob(
            job_pb.WatchJobRequest(job_id=job.job_id), metadata=jobs.metadata
        )
    ]
    assert [j.lifecycle_status for j in done] == ["succeeded"]


async def test_admin_get_retry_stats_and_cancel_user_jobs(
    scheduler: RunningScheduler, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="scheduler_service")
    jobs, admin = JobClient(scheduler.channel), _admin(scheduler)
    runtime = ClientRuntime(scheduler.channel, "rt-admin", slots=1)
    await runtime.connect()
    try:
        failed = await jobs.create()
        lease = await runtime.next_lease()
        await runtime.fail(lease, "INVALID_CREDENTIAL", retryable=False)
    finally:
        await runtime.close()
    user_view = await jobs.get(failed.job_id)
    admin_view = await admin.GetJob(job_pb.GetJobRequest(job_id=failed.job_id))
    assert user_view.internal_error_message == ""
    assert admin_view.internal_error_message == "details for operators"

    retried = await asyncio.gather(
        *(admin.RetryJob(admin_pb.RetryJobRequest(job_id=failed.job_id)) for _ in range(5))
    )
    assert len({r.job_id for r in retried}) == 1
    new = retried[0]
    assert (new.retried_from_job_id, new.lifecycle_status, new.user_id) == (
        failed.job_id,
        "queued",
        "user-1",
    )
    again = await admin.RetryJob(admin_pb.RetryJobRequest(job_id=failed.job_id))
    assert again.job_id == new.job_id
    audited = [r for r in caplog.records if getattr(r, "action", "") == "admin_retry"]
    assert audited and all(
        (getattr(r, "jobId", None), getattr(r, "newJobId", None)) == (failed.job_id, new.job_id)
        for r in audited
    ), "every admin retry is in the audit log"
    error = await _error(admin.RetryJob(admin_pb.RetryJobRequest(job_id=new.job_id)))
    assert (error.code(), error_reason(error)) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "JOB_NOT_RETRYABLE",
    )

    stats = await admin.GetQueueStats(admin_pb.GetQueueStatsRequest())
    depth = {(d.queue_name, d.job_type, d.lifecycle_status): d.count for d in stats.depths}
    assert depth[("ai-interactive", "synthetic_echo", "failed")] == 1
    assert depth[("ai-interactive", "synthetic_echo", "queued")] == 1
    assert [a.queue_name for a in stats.oldest_queued] == ["ai-interactive"]
    assert stats.dead_outbox_events == 0 and stats.outbox_lag_seconds >= 0

    # CancelUserJobs: one running (cancel requested) and two queued (cancelled at once).
    await jobs.cancel(new.job_id)  # so that the runtime below leases the consent user's job
    consent = JobClient(scheduler.channel, "withdrawn")
    holder = ClientRuntime(scheduler.channel, "rt-consent", slots=1)
    await holder.connect()
    try:
        running = await consent.create()
        assert (await holder.next_lease()).job_id == running.job_id
        queued = [await consent.create(), await consent.create()]
        reply = await admin.CancelUserJobs(admin_pb.CancelUserJobsRequest(user_id="withdrawn"))
        assert (reply.cancelled, reply.cancel_requested) == (2, 1)
        notice = await holder.next_cancel()
        assert notice.job_id == running.job_id
        for job in queued:
            assert (await consent.get(job.job_id)).lifecycle_status == "cancelled"
        assert (await consent.get(running.job_id)).HasField("cancel_requested_at")
        again_reply = await admin.CancelUserJobs(
            admin_pb.CancelUserJobsRequest(user_id="withdrawn")
        )
        assert (again_reply.cancelled, again_reply.cancel_requested) == (0, 0)
    finally:
        await holder.close()


async def test_admin_list_filters(scheduler: RunningScheduler) -> None:
    admin = _admin(scheduler)
    await JobClient(scheduler.channel, "a").create()
    await JobClient(scheduler.channel, "b").create(
        "weak_point_analysis", snapshot={"learner": {"id": "l"}}
    )
    by_user = await admin.ListJobs(admin_pb.AdminListJobsRequest(user_id="b"))
    assert [j.job_type for j in by_user.jobs] == ["weak_point_analysis"]
    by_queue = await admin.ListJobs(admin_pb.AdminListJobsRequest(queue_name="ai-background"))
    assert [j.user_id for j in by_queue.jobs] == ["b"]
    error = await _error(admin.ListJobs(admin_pb.AdminListJobsRequest(lifecycle_status="pending")))
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT


async def test_unexpected_errors_answer_internal_with_an_id_only(
    scheduler: RunningScheduler, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("SELECT secret FROM /var/lib/mysql at line 42")

    monkeypatch.setattr(scheduler.app.jobs, "get", broken)
    jobs = JobClient(scheduler.channel)
    error = await _error(jobs.get("01a2b3c4-0000-7000-8000-000000000000"))
    assert (error.code(), error_reason(error)) == (grpc.StatusCode.INTERNAL, "INTERNAL")
    details = error.details() or ""
    assert details.startswith("internal error ") and "SELECT" not in details
    error_id = details.removeprefix("internal error ")
    logged = [r for r in caplog.records if getattr(r, "errorId", None) == error_id]
    assert len(logged) == 1 and logged[0].exc_info is not None

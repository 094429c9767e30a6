"""Every path of the runtime protocol, driven by a runtime built only on the generated client,
against real grpc.aio schedulers on loopback and real MariaDB."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.status_details import error_reason
from tests.conftest import DatabaseFactory
from tests.support.db_checks import ARTIFACTS, USAGE, count, events, job_row
from tests.support.schedulers import RunningScheduler, SchedulerFactory
from tests.support.schema_copy import migrated

pytestmark = pytest.mark.mysql


async def _runtime(scheduler: RunningScheduler, name: str, **kw: object) -> ClientRuntime:
    runtime = ClientRuntime(scheduler.channel, name, **kw)  # type: ignore[arg-type]
    await runtime.connect()
    return runtime


async def test_success_projects_artifacts_usage_and_event(
    database: DatabaseFactory, start_scheduler: SchedulerFactory
) -> None:
    url = await database()
    await migrated(url)
    scheduler = await start_scheduler(url)
    runtime = await _runtime(scheduler, "rt-a")
    jobs = JobClient(scheduler.channel)
    try:
        created = await jobs.create(snapshot={"n": 1, "text": "héllo"})
        assert created.lifecycle_status in {"queued", "running"}  # a waiting runtime is that fast
        lease = await runtime.next_lease()
        assert (lease.job_id, lease.attempt_no) == (created.job_id, 1)
        assert lease.timeout_ms == 30_000 and lease.prompt_key == "synthetic_echo"
        beat = await runtime.heartbeat(lease, progress=30)
        assert beat.cancel_requested is False
        reply = await runtime.submit(lease, echo_output(lease))
        assert reply.duplicate is False
        assert reply.result_idempotency_key.startswith(f"{lease.job_id}:1:")

        job = await jobs.get(created.job_id)
        assert job.lifecycle_status == "succeeded"
        assert job.result.artifact_count == 1
        assert job.result.artifacts[0].artifact_type == "SyntheticEcho"
        engine = scheduler.app.engine
        assert await count(engine, USAGE, jobId=lease.job_id) == 1
        assert await events(engine, lease.job_id) == ["ai.job.enqueue", "ai.job.completed"]
        row = await job_row(engine, lease.job_id)
        assert (row["status"], row["progress"]) == ("completed", 100)
    finally:
        await runtime.close()


async def test_duplicate_and_conflicting_submits(scheduler: RunningScheduler) -> None:
    runtime = await _runtime(scheduler, "rt-a")
    jobs = JobClient(scheduler.channel)
    try:
        created = await jobs.create()
        lease = await runtime.next_lease()
        first = await runtime.submit(lease, echo_output(lease))
        again = await runtime.submit(lease, echo_output(lease))
        assert again.duplicate is True
        assert again.result_idempotency_key == first.result_idempotency_key
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await runtime.submit(lease, {"echo": "something else"})
        assert caught.value.code() is grpc.StatusCode.ALREADY_EXISTS
        assert error_reason(caught.value) == "RESULT_ALREADY_EXISTS"
        engine = scheduler.app.engine
        assert await count(engine, ARTIFACTS, jobId=created.job_id) == 1
        assert await events(engine, created.job_id) == ["ai.job.enqueue", "ai.job.completed"]
        assert await count(engine, USAGE, jobId=created.job_id) == 1
    finally:
        await runtime.close()


async def test_racing_conflicting_submits_for_one_attempt_have_one_winner(
    scheduler: RunningScheduler,
) -> None:
    """A duplicated runtime process submits two different outputs for the same attempt at the
    same moment (S4b): one is accepted, the other gets ALREADY_EXISTS, the state flips once."""
    runtime = await _runtime(scheduler, "rt-a", slots=20)
    jobs = JobClient(scheduler.channel)
    try:
        created = [await jobs.create() for _ in range(20)]
        leases = [await runtime.next_lease() for _ in created]
        for lease in leases:
            outcomes = await asyncio.gather(
                runtime.submit(lease, {"echo": "first"}),
                runtime.submit(lease, {"echo": "second"}),
                return_exceptions=True,
            )
            refused = [o for o in outcomes if isinstance(o, BaseException)]
            assert len(refused) == 1, outcomes
            assert isinstance(refused[0], grpc.aio.AioRpcError)
            assert error_reason(refused[0]) == "RESULT_ALREADY_EXISTS"
            engine = scheduler.app.engine
            assert await count(engine, ARTIFACTS, jobId=lease.job_id) == 1
            assert await events(engine, lease.job_id) == ["ai.job.enqueue", "ai.job.completed"]
    finally:
        await runtime.close()


async def test_expired_lease_is_reaped_and_the_late_submit_refused(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, lease_ttl_s=1, lease_grace_s=0.2)
    first = await _runtime(scheduler, "rt-first", slots=1)
    jobs = JobClient(scheduler.channel)
    created = await jobs.create()
    lease1 = await first.next_lease()
    await first.close()  # the first runtime goes silent: no heartbeat, no credit
    second = await _runtime(scheduler, "rt-second", slots=1)
    try:
        lease2 = await second.next_lease()  # arrives once the reaper took the lease back
        assert (lease2.job_id, lease2.attempt_no) == (created.job_id, 2)

        zombie = ClientRuntime(scheduler.channel, "rt-first")
        with pytest.raises(grpc.aio.AioRpcError) as late:
            await zombie.submit(lease1, echo_output(lease1))
        assert late.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert error_reason(late.value) == "LEASE_LOST"
        with pytest.raises(grpc.aio.AioRpcError) as beat:
            await zombie.heartbeat(lease1)
        assert error_reason(beat.value) == "LEASE_LOST"

        await second.submit(lease2, echo_output(lease2))
        with pytest.raises(grpc.aio.AioRpcError) as after:
            await zombie.submit(lease1, echo_output(lease1))
        assert error_reason(after.value) == "LEASE_LOST"
        engine = scheduler.app.engine
        assert await count(engine, ARTIFACTS, jobId=created.job_id) == 1
        row = await job_row(engine, created.job_id)
        assert (row["lifecycleStatus"], row["attemptCount"]) == ("succeeded", 2)
    finally:
        await second.close()


async def test_retryable_failure_requeues_with_backoff_then_succeeds(
    scheduler: RunningScheduler,
) -> None:
    runtime = await _runtime(scheduler, "rt-a", slots=1)
    jobs = JobClient(scheduler.channel)
    try:
        created = await jobs.create()
        lease1 = await runtime.next_lease()
        await runtime.heartbeat(lease1, progress=30)
        reply = await runtime.fail(lease1, "MODEL_RATE_LIMIT", retryable=True, retry_after_ms=300)
        assert reply.lifecycle_status == "queued"
        row = await job_row(scheduler.app.engine, created.job_id)
        assert row["errorCode"] == "MODEL_RATE_LIMIT"
        # The retry-after is a floor on the wait (database time).
        assert (row["availableAt"] - row["queuedAt"]).total_seconds() >= 0.299
        assert reply.next_attempt_at.ToDatetime() >= row["availableAt"].replace(microsecond=0)
        runtime.credit()
        lease2 = await runtime.next_lease()
        assert (lease2.job_id, lease2.attempt_no) == (created.job_id, 2)
        await runtime.submit(lease2, echo_output(lease2))
        job = await jobs.get(created.job_id)
        assert (job.lifecycle_status, job.attempt_count, job.error_code) == ("succeeded", 2, "")
    finally:
        await runtime.close()


async def test_non_retryable_failure_fails_the_job(scheduler: RunningScheduler) -> None:
    runtime = await _runtime(scheduler, "rt-a", slots=1)
    jobs = JobClient(scheduler.channel)
    try:
        created = await jobs.create()
        lease = await runtime.next_lease()
        reply = await runtime.fail(lease, "CONTENT_SAFETY_BLOCKED", retryable=False)
        assert reply.lifecycle_status == "failed"
        assert not reply.HasField("next_attempt_at")
        job = await jobs.get(created.job_id)
        assert (job.lifecycle_status, job.error_code) == ("failed", "CONTENT_SAFETY_BLOCKED")
        assert job.internal_error_message == ""  # for admins only
        assert await events(scheduler.app.engine, created.job_id) == [
            "ai.job.enqueue",
            "ai.job.failed",
        ]
    finally:
        await runtime.close()


async def test_retries_exhausted_fail_the_job(scheduler: RunningScheduler) -> None:
    runtime = await _runtime(scheduler, "rt-a", slots=1)
    jobs = JobClient(scheduler.channel)
    try:
        created = await jobs.create()
        statuses = []
        for attempt in (1, 2, 3):
            lease = await runtime.next_lease()
            assert lease.attempt_no == attempt
            statuses.append(
                (await runtime.fail(lease, "NETWORK_ERROR", retryable=True)).lifecycle_status
            )
            runtime.credit()
        assert statuses == ["queued", "queued", "failed"]
        job = await jobs.get(created.job_id)
        assert (job.lifecycle_status, job.attempt_count) == ("failed", 3)
    finally:
        await runtime.close()


async def test_cancel_while_running_is_pushed_and_seen_in_heartbeats(
    scheduler: RunningScheduler,
) -> None:
    runtime = await _runtime(scheduler, "rt-a", slots=1)
    jobs = JobClient(scheduler.channel)
    try:
        created = await jobs.create()
        lease = await runtime.next_lease()
        reply = await jobs.cancel(created.job_id)
        assert reply.outcome == "cancel_requested"
        notice = await runtime.next_cancel()
        assert (notice.job_id, notice.attempt_no) == (lease.job_id, lease.attempt_no)
        assert (await runtime.heartbeat(lease)).cancel_requested is True
        failed = await runtime.fail(lease, "CANCELLED", retryable=False)
        assert failed.lifecycle_status == "cancelled"
        job = await jobs.get(created.job_id)
        assert job.lifecycle_status == "cancelled"
        row = await job_row(scheduler.app.engine, created.job_id)
        assert (row["status"], row["errorCode"]) == ("failed", "CANCELLED")
        assert await events(scheduler.app.engine, created.job_id) == [
            "ai.job.enqueue",
            "ai.job.cancelled",
        ]
    finally:
        await runtime.close()


async def test_cancel_requested_through_another_replica_reaches_the_stream(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    a = await start_scheduler(mysql_url)
    b = await start_scheduler(mysql_url)
    runtime = await _runtime(a, "rt-a", slots=1)
    try:
        created = await JobClient(b.channel).create()  # created through B, leased through A
        lease = await runtime.next_lease()
        assert lease.job_id == created.job_id
        await JobClient(b.channel).cancel(created.job_id)
        notice = await runtime.next_cancel()
        assert notice.job_id == created.job_id
    finally:
        await runtime.close()


async def test_lock_claims_a_named_job_once(scheduler: RunningScheduler) -> None:
    jobs = JobClient(scheduler.channel)
    created = await jobs.create()  # no runtime is polling: it stays queued
    locker = ClientRuntime(scheduler.channel, "rt-lock")
    from shared.gen.aijob.v1 import runtime_service_pb2 as rt

    lease = await locker.stub.Lock(
        rt.LockRequest(job_id=created.job_id, runtime_instance_id="rt-lock")
    )
    assert (lease.job_id, lease.attempt_no) == (created.job_id, 1)
    assert lease.snapshot["text"] == "hello"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await locker.stub.Lock(
            rt.LockRequest(job_id=created.job_id, runtime_instance_id="rt-other")
        )
    assert caught.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(caught.value) == "JOB_ALREADY_LOCKED"
    await locker.submit(lease, echo_output(lease))
    with pytest.raises(grpc.aio.AioRpcError) as done:
        await locker.stub.Lock(
            rt.LockRequest(job_id=created.job_id, runtime_instance_id="rt-other")
        )
    assert error_reason(done.value) == "JOB_ALREADY_TERMINAL"


async def test_slots_bound_the_leases_in_flight(scheduler: RunningScheduler) -> None:
    jobs = JobClient(scheduler.channel)
    created = [await jobs.create() for _ in range(5)]
    runtime = await _runtime(scheduler, "rt-a", slots=2)
    try:
        first = [await runtime.next_lease(), await runtime.next_lease()]
        with pytest.raises(TimeoutError):
            await runtime.next_lease(within_s=0.5)  # no third lease without a credit
        for lease in first:
            await runtime.submit(lease, echo_output(lease))
        runtime.credit(2)
        more = [await runtime.next_lease(), await runtime.next_lease()]
        leased = {lease.job_id for lease in first + more}
        assert len(leased) == 4 and leased <= {j.job_id for j in created}
    finally:
        await runtime.close()


async def test_undelivered_lease_is_released_without_spending_an_attempt(
    scheduler: RunningScheduler,
) -> None:
    from scheduler_service.services.dispatch import StreamSession

    jobs = JobClient(scheduler.channel)
    created = await jobs.create()
    app = scheduler.app
    (lease,) = await app.leasing.claim("rt-gone", ["synthetic_echo"], 1)
    session = StreamSession("rt-gone", frozenset({"synthetic_echo"}), 1)
    await app.dispatcher.release_undelivered(session, [lease])
    row = await job_row(app.engine, created.job_id)
    assert (row["lifecycleStatus"], row["attemptCount"], row["maxAttempts"]) == ("queued", 0, 3)
    runtime = await _runtime(scheduler, "rt-b", slots=1)
    try:
        again = await runtime.next_lease()
        # The attempt goes back with the lease; the new lease's token fences off the old one.
        assert (again.job_id, again.attempt_no) == (created.job_id, 1)
        assert again.lease_token != lease.lease_token
        stale = runtime.stub.Heartbeat(
            rt.HeartbeatRequest(
                job_id=lease.job_id,
                attempt_no=1,
                runtime_instance_id="rt-b",
                lease_token=lease.lease_token,
            ),
            metadata=runtime.metadata,
        )
        with pytest.raises(grpc.aio.AioRpcError) as lost:
            await stale
        assert error_reason(lost.value) == "LEASE_LOST"
    finally:
        await runtime.close()


async def test_job_types_are_honoured(scheduler: RunningScheduler) -> None:
    jobs = JobClient(scheduler.channel)
    quiz = await jobs.create(
        "quiz_generation",
        snapshot={"learner": {"id": "l1"}, "material": {"id": "m1", "title": "Cells"}},
    )
    echo_runtime = await _runtime(scheduler, "rt-echo", slots=1)
    try:
        echo = await jobs.create()
        lease = await echo_runtime.next_lease()
        assert lease.job_id == echo.job_id
        row = await job_row(scheduler.app.engine, quiz.job_id)
        assert row["lifecycleStatus"] == "queued"
    finally:
        await echo_runtime.close()
    await asyncio.sleep(0)

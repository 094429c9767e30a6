"""A job created while a runtime here waits for its type is written already leased: its row's
insert is its lock (claims.claim_fresh), so nothing stands between the write and the commit but
its snapshot. It is judged as any claim judges a queued job: a user at the running cap, a model
key at its concurrency, or an older job waiting for the type leaves it written queued."""

from __future__ import annotations

import pytest
from google.protobuf import json_format

from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output
from devtools.harness.tokens import ADMIN_TOKEN, bearer
from scheduler_service.core.lease_tokens import digest
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from tests.protocol.test_handoff import _subscribed
from tests.support.db_checks import job_row
from tests.support.schedulers import RunningScheduler, SchedulerFactory

pytestmark = pytest.mark.mysql


async def _waiting_runtime(
    scheduler: RunningScheduler, instance_id: str, slots: int
) -> ClientRuntime:
    await scheduler.app.dispatcher.stop()  # no rounds: only a create can lease
    runtime = ClientRuntime(scheduler.channel, instance_id, slots=slots)
    await runtime.connect()
    await _subscribed(scheduler, instance_id)
    return runtime


async def test_a_job_created_for_a_waiting_runtime_is_written_leased(
    scheduler: RunningScheduler,
) -> None:
    runtime = await _waiting_runtime(scheduler, "rt-fresh", slots=1)
    try:
        created = await JobClient(scheduler.channel).create()
        # The reply is the row as written: already running, its first attempt.
        assert (created.lifecycle_status, created.attempt_count) == ("running", 1)
        lease = await runtime.next_lease()
        assert (lease.job_id, lease.attempt_no) == (created.job_id, 1)
        row = await job_row(scheduler.app.engine, created.job_id)
        assert (row["lifecycleStatus"], row["lockedBy"]) == ("running", "rt-fresh")
        assert row["leaseTokenHash"] == digest(lease.lease_token)
        # One statement wrote it: available, locked and started at the same instant.
        assert row["availableAt"] == row["lockedAt"] == row["startedAt"] == row["createdAt"]
        assert row["lockUntil"] > row["lockedAt"]
        if "status" in row:  # System A's column, kept in step
            assert row["status"] == "processing"
        answer = await runtime.submit(lease, echo_output(lease))
        assert not answer.duplicate
        assert (await job_row(scheduler.app.engine, created.job_id))[
            "lifecycleStatus"
        ] == "succeeded"
    finally:
        await runtime.close()


async def test_a_user_at_the_running_cap_gets_the_job_written_queued(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, max_running_per_user=1)
    runtime = await _waiting_runtime(scheduler, "rt-capped", slots=3)
    try:
        capped = JobClient(scheduler.channel, user_id="user-capped")
        first = await capped.create()
        second = await capped.create()
        other = await JobClient(scheduler.channel, user_id="user-other").create()
        assert (first.lifecycle_status, second.lifecycle_status) == ("running", "queued")
        # The capped job waits in the queue, so the other user's goes through the claim after
        # its insert (an older queued job could have come first), which passes the capped one.
        leased = {(await runtime.next_lease()).job_id for _ in range(2)}
        assert leased == {first.job_id, other.job_id}
        assert (await job_row(scheduler.app.engine, second.job_id))["lifecycleStatus"] == "queued"
        assert (await job_row(scheduler.app.engine, other.job_id))["lifecycleStatus"] == "running"
    finally:
        await runtime.close()


async def test_a_model_key_at_its_concurrency_gets_the_job_written_queued(
    scheduler: RunningScheduler,
) -> None:
    definition = scheduler.app.registry.get("synthetic_echo")
    limit = admin_pb.ModelLimit(
        provider=definition.model_provider,
        model=definition.model_name,
        credential_scope="platform",
        max_concurrency=1,
    )
    await admin_service_pb2_grpc.AdminServiceStub(scheduler.channel).PutModelLimit(
        admin_pb.PutModelLimitRequest(limit=limit), metadata=bearer(ADMIN_TOKEN), timeout=30
    )
    runtime = await _waiting_runtime(scheduler, "rt-limited", slots=3)
    try:
        jobs = JobClient(scheduler.channel)
        first, second = await jobs.create(), await jobs.create()
        assert (first.lifecycle_status, second.lifecycle_status) == ("running", "queued")
        assert (await runtime.next_lease()).job_id == first.job_id
        assert (await job_row(scheduler.app.engine, second.job_id))["lifecycleStatus"] == "queued"
    finally:
        await runtime.close()


async def test_an_older_waiting_job_is_leased_and_the_new_one_written_queued(
    scheduler: RunningScheduler,
) -> None:
    await scheduler.app.dispatcher.stop()
    jobs = JobClient(scheduler.channel)
    older = await jobs.create()
    runtime = await _waiting_runtime(scheduler, "rt-older", slots=1)
    try:
        newer = await jobs.create()
        assert newer.lifecycle_status == "queued"
        assert (await runtime.next_lease()).job_id == older.job_id
    finally:
        await runtime.close()


async def test_a_gathering_offers_its_jobs_in_the_claims_order(
    scheduler: RunningScheduler,
) -> None:
    """One CreateJobs call, its urgent job last, one free slot: the urgent job is leased."""
    runtime = await _waiting_runtime(scheduler, "rt-order", slots=1)
    try:
        jobs = JobClient(scheduler.channel)
        items = []
        for priority in (90, 90, 10):
            job = job_pb.CreateJobRequest(job_type="synthetic_echo", priority=priority)
            json_format.ParseDict({"p": priority}, job.snapshot)
            items.append(job_pb.CreateJobsItem(job=job))
        reply = await jobs.stub.CreateJobs(
            job_pb.CreateJobsRequest(items=items), metadata=jobs.metadata, timeout=30
        )
        statuses = [result.job.lifecycle_status for result in reply.results]
        assert statuses == ["queued", "queued", "running"]
        assert (await runtime.next_lease()).job_id == reply.results[2].job.job_id
    finally:
        await runtime.close()

"""Fair dispatch on real MariaDB over real gRPC: within a priority, users are
served in turn; one user's backlog never delays another user's first job past one round."""

from __future__ import annotations

import pytest
from google.protobuf import json_format

from devtools.harness.runtime_client import ClientRuntime, JobClient
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from tests.support.schedulers import RunningScheduler, SchedulerFactory

pytestmark = pytest.mark.mysql


async def _backlog(scheduler: RunningScheduler, user: str, count: int) -> list[str]:
    items = []
    for n in range(count):
        job = job_pb.CreateJobRequest(job_type="synthetic_echo")
        json_format.ParseDict({"n": n}, job.snapshot)
        items.append(job_pb.CreateJobsItem(user_id=user, job=job))
    client = JobClient(scheduler.channel, "batch-caller")
    reply = await client.stub.CreateJobs(
        job_pb.CreateJobsRequest(items=items), metadata=client.metadata, timeout=60
    )
    assert all(result.status.code == 0 for result in reply.results)
    return [result.job.job_id for result in reply.results]


async def test_another_users_first_job_is_next_after_a_200_job_backlog(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, max_active_jobs_per_user=1_000)
    backlog = await _backlog(scheduler, "nightly-batch", 200)
    first = await JobClient(scheduler.channel, "learner-7").create()
    # No runtime was connected: all 201 are queued. The first claim of one slot takes the
    # newcomer's job, ahead of the 200 older ones.
    runtime = ClientRuntime(scheduler.channel, "rt-fair", slots=1)
    await runtime.connect()
    try:
        lease = await runtime.next_lease()
        assert lease.job_id == first.job_id
        assert first.job_id not in backlog
    finally:
        await runtime.close()


async def test_three_users_alternate_within_a_priority(scheduler: RunningScheduler) -> None:
    big = await _backlog(scheduler, "big", 30)
    small = {
        user: [(await JobClient(scheduler.channel, user).create()).job_id for _ in range(3)]
        for user in ("small-a", "small-b")
    }
    runtime = ClientRuntime(scheduler.channel, "rt-fair", slots=9)
    await runtime.connect()
    try:
        leased = {(await runtime.next_lease()).job_id for _ in range(9)}
    finally:
        await runtime.close()
    # Nine places: the six small jobs and three of the big backlog, whatever the order.
    assert set(small["small-a"]) | set(small["small-b"]) <= leased
    assert len(leased & set(big)) == 3

"""Rooms in the authenticated pool: two service tokens' WatchJob streams, each under its own cap,
filled the pool, and runtimes' Poll and Heartbeat, then operators' ListJobs and GetQueueStats,
were refused TOO_MANY_STREAMS. Now runtimes, operators and services each have a room of the pool
that no other role takes, and no token holds more than half of its role's room. Real MariaDB,
real gRPC."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output
from devtools.harness.tokens import ADMIN_TOKEN, SERVICE_TOKEN, bearer
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.status_details import error_reason
from tests.support.schedulers import SchedulerFactory

pytestmark = pytest.mark.mysql

LIMIT = 20  # rooms of 6 for runtimes, 2 for operators, 12 for services (at most 6 per token)
OTHER_TOKEN = "second-service-token"


async def _watch_until_refused(jobs: JobClient, job_id: str, held: list[Any]) -> int:
    """Open WatchJob streams until one is refused; the admitted ones stay open in ``held``."""
    admitted = 0
    while True:
        call = jobs.stub.WatchJob(job_pb.WatchJobRequest(job_id=job_id), metadata=jobs.metadata)
        try:
            await asyncio.wait_for(call.read(), 30)
        except grpc.aio.AioRpcError as refused:
            assert (refused.code(), error_reason(refused)) == (
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                "TOO_MANY_STREAMS",
            )
            return admitted
        held.append(call)
        admitted += 1


async def test_two_service_tokens_cannot_fill_the_pool_and_runtimes_keep_room(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(
        mysql_url, max_concurrent_rpcs=LIMIT, service_tokens=f"{SERVICE_TOKEN},{OTHER_TOKEN}"
    )
    first = JobClient(scheduler.channel, "user-w")
    second = JobClient(scheduler.channel, "user-w", token=OTHER_TOKEN)
    watched = (await first.create()).job_id
    held: list[Any] = []
    try:
        assert await _watch_until_refused(first, watched, held) == 6
        # The second token still finds its share, then the services' room is full.
        assert await _watch_until_refused(second, watched, held) == 6
        # Operators keep theirs: the admin's ListJobs and GetQueueStats answer.
        admin = admin_service_pb2_grpc.AdminServiceStub(scheduler.channel)
        listed = await admin.ListJobs(
            admin_pb.AdminListJobsRequest(), metadata=bearer(ADMIN_TOKEN), timeout=30
        )
        assert watched in [job.job_id for job in listed.jobs]
        await admin.GetQueueStats(
            admin_pb.GetQueueStatsRequest(), metadata=bearer(ADMIN_TOKEN), timeout=30
        )
        runtime = ClientRuntime(scheduler.channel, "rt-room", slots=1)
        await runtime.connect()
        try:
            lease = await runtime.next_lease()
            assert lease.job_id == watched
            await runtime.heartbeat(lease)
            assert (await runtime.submit(lease, echo_output(lease))).duplicate is False
        finally:
            await runtime.close()
    finally:
        for call in held:
            call.cancel()

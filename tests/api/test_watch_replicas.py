"""A WatchJob stream sees a change made through another replica: the watch hub of the
replica serving the stream finds it in its next read of the watched jobs."""

from __future__ import annotations

from typing import Any

import pytest

from devtools.harness.runtime_client import JobClient
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from tests.support.schedulers import SchedulerFactory

pytestmark = pytest.mark.mysql


async def test_a_watcher_sees_a_cancel_made_through_another_replica(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    watching = await start_scheduler(mysql_url, watch_poll_ms=50)
    other = await start_scheduler(mysql_url)
    here, there = JobClient(watching.channel), JobClient(other.channel)
    job = await here.create()
    call = here.stub.WatchJob(job_pb.WatchJobRequest(job_id=job.job_id), metadata=here.metadata)
    try:
        first: Any = await call.read()
        assert first.lifecycle_status == "queued"
        assert (await there.cancel(job.job_id)).job.lifecycle_status == "cancelled"
        seen: Any = await call.read()
        assert seen.lifecycle_status == "cancelled"
        assert watching.app.watch_hub.watched_jobs == 0  # the stream ended with its job
    finally:
        call.cancel()

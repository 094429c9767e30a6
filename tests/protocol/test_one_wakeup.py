"""One wake-up of dispatch per new job: the commit of a create wakes this replica's dispatch once
(for the whole commit), and the job's ``ai.job.enqueue`` event, once the outbox delivers it
here, does not wake it again (it wakes the replicas that did not create the job)."""

from __future__ import annotations

import pytest
from google.protobuf import json_format

from devtools.harness.runtime_client import JobClient
from devtools.harness.waiting import eventually
from scheduler_service.services.dispatch import LeaseDispatcher
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from tests.support.db_checks import OUTBOX, count
from tests.support.schedulers import RunningScheduler, SchedulerFactory

pytestmark = pytest.mark.mysql


class Wakes:
    def __init__(self) -> None:
        self.count = 0


@pytest.fixture
def wakes(monkeypatch: pytest.MonkeyPatch) -> Wakes:
    """Counts every wake-up of a dispatcher (patched before the scheduler is built, so the
    outbox's sink holds the counting one too)."""
    seen = Wakes()
    notify = LeaseDispatcher.notify

    def counted(self: LeaseDispatcher) -> None:
        seen.count += 1
        notify(self)

    monkeypatch.setattr(LeaseDispatcher, "notify", counted)
    return seen


async def _all_published(scheduler: RunningScheduler, events: int) -> None:
    async def published() -> bool:
        return await count(scheduler.app.engine, OUTBOX, status="published") == events

    await eventually(published)


async def test_each_create_wakes_dispatch_once(
    wakes: Wakes, mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url)
    jobs = JobClient(scheduler.channel)
    before = wakes.count
    for _ in range(5):
        await jobs.create()
    await _all_published(scheduler, 5)
    assert wakes.count - before == 5


async def test_a_bulk_create_wakes_dispatch_once(
    wakes: Wakes, mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url)
    jobs = JobClient(scheduler.channel, "caller")
    items = []
    for index in range(20):
        job = job_pb.CreateJobRequest(job_type="synthetic_echo")
        json_format.ParseDict({"n": index}, job.snapshot)
        items.append(job_pb.CreateJobsItem(user_id=f"user-{index % 4}", job=job))
    before = wakes.count
    await jobs.stub.CreateJobs(
        job_pb.CreateJobsRequest(items=items), metadata=jobs.metadata, timeout=60
    )
    await _all_published(scheduler, 20)
    assert wakes.count - before == 1

"""Jobs that wait for the cheap hours, on MariaDB with a clock the test sets.

During a peak window (DeepSeek's, Beijing time) dispatch leaves an off-peak job queued — unless
its deadline cannot wait for the window's end plus its attempts' time — and leases it once the
window ends; an immediate job is never deferred. GetJob shows ``deferred_until``, GetQueueStats
the deferred count per queue."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from google.protobuf import timestamp_pb2

from devtools.harness.runtime_client import JobClient
from scheduler_service.core.cheap_hours import CheapHours
from scheduler_service.core.peak_hours import DEEPSEEK_PEAK_HOURS, PeakHours
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc as admin_grpc
from shared.gen.aijob.v1 import types_pb2
from tests.runtime.test_pipeline import SNAPSHOT
from tests.support.db import db_now_value
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql

#: Thursday 2026-12-03, 10:00 Beijing time: the morning window, which ends at 12:00 (04:00 UTC).
IN_PEAK = datetime(2026, 12, 3, 2, 0)
WINDOW_ENDS = datetime(2026, 12, 3, 4, 0)
BACKGROUND = "weak_point_analysis"  # off-peak by default; ai-background, 3 x 120 s


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock(scheduler: RunningScheduler) -> Clock:
    clock = Clock(IN_PEAK)
    scheduler.app.cheap_hours = CheapHours(PeakHours.parse(DEEPSEEK_PEAK_HOURS), clock)
    return clock


async def _claim(scheduler: RunningScheduler) -> list[str]:
    leases = await scheduler.app.leasing.claim("rt-cheap", [BACKGROUND, "synthetic_echo"], 10)
    return sorted(lease.job_id for lease in leases)


async def _create(scheduler: RunningScheduler, job_type: str, **fields: Any) -> types_pb2.Job:
    snapshot = SNAPSHOT if job_type == BACKGROUND else None
    return await JobClient(scheduler.channel, "user-cheap").create(
        job_type, snapshot=snapshot, **fields
    )


async def test_an_off_peak_job_waits_for_the_window_to_end(
    scheduler: RunningScheduler, clock: Clock
) -> None:
    waiting = await _create(scheduler, BACKGROUND)
    immediate = await _create(scheduler, "synthetic_echo")
    assert waiting.cost_policy == types_pb2.COST_POLICY_OFF_PEAK
    assert immediate.cost_policy == types_pb2.COST_POLICY_IMMEDIATE
    # Its default deadline: six hours from the database's now.
    now = await db_now_value(scheduler.app.engine)
    deadline = waiting.deadline_at.ToDatetime()
    assert now + timedelta(hours=5, minutes=59) < deadline <= now + timedelta(hours=6, seconds=5)

    # In the window: only the immediate job is leased; the other says until when it waits.
    assert await _claim(scheduler) == [immediate.job_id]
    shown = await JobClient(scheduler.channel, "user-cheap").get(waiting.job_id)
    # Two hours from the database's now: the window's end, as the test's clock puts it.
    until = shown.deferred_until.ToDatetime()
    # (the replica's clock is a sample of the database's carried forward: allow it a second)
    assert now + timedelta(hours=2, seconds=-1) <= until <= now + timedelta(hours=2, minutes=1)
    stats = await admin_grpc.AdminServiceStub(scheduler.channel).GetQueueStats(
        admin_pb.GetQueueStatsRequest()
    )
    assert [(d.queue_name, d.count) for d in stats.deferred] == [("ai-background", 1)]
    assert await _claim(scheduler) == []

    # The window ends: it is leased.
    clock.now = WINDOW_ENDS
    assert await _claim(scheduler) == [waiting.job_id]


async def test_an_off_peak_job_whose_deadline_cannot_wait_is_leased_at_once(
    scheduler: RunningScheduler, clock: Clock
) -> None:
    now = await db_now_value(scheduler.app.engine)
    # The window lasts two more hours (by the test's clock); its attempts need 6 minutes.
    urgent = timestamp_pb2.Timestamp()
    urgent.FromDatetime(now + timedelta(hours=2, minutes=5))
    patient = timestamp_pb2.Timestamp()
    patient.FromDatetime(now + timedelta(hours=2, minutes=7))
    must_go = await _create(scheduler, BACKGROUND, deadline=urgent)
    can_wait = await _create(scheduler, BACKGROUND, deadline=patient)
    assert not must_go.HasField("deferred_until") and can_wait.HasField("deferred_until")
    assert await _claim(scheduler) == [must_go.job_id]
    # An explicit immediate policy overrides the type's default.
    forced = await _create(scheduler, BACKGROUND, cost_policy=types_pb2.COST_POLICY_IMMEDIATE)
    assert not forced.HasField("deadline_at")
    assert await _claim(scheduler) == [forced.job_id]

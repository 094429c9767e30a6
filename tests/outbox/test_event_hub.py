"""The event hub: however many SubscribeEvents streams are open, the event log is read
by the hub, once per round, and fanned out in memory; a subscriber reads the log itself only to
catch up. Real MariaDB, real gRPC."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from devtools.harness.runtime_client import JobClient
from scheduler_service.sql.event_log import latest_position
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import types_pb2
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql

SUBSCRIBERS = 40


async def _read(call: Any) -> types_pb2.JobEvent:
    event: types_pb2.JobEvent = await call.read()
    return event


@contextmanager
def log_reads(engine: AsyncEngine) -> Iterator[Counter[str]]:
    """Reads of the published event log, by the name of the task that made them."""
    seen: Counter[str] = Counter()

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if re.search(r"publishedSeq`? >", statement):
            task = asyncio.current_task()
            seen["hub" if task is not None and task.get_name() == "event-hub" else "other"] += 1

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)


async def test_subscribers_share_the_hubs_reads(scheduler: RunningScheduler) -> None:
    app = scheduler.app
    jobs = JobClient(scheduler.channel)
    # From a position fixed now: a stream that starts late must not begin after the first event.
    start = str(await latest_position(app.uow))
    request = job_pb.SubscribeEventsRequest(event_types=["ai.job.enqueue"], after_event_id=start)
    calls = [jobs.stub.SubscribeEvents(request, metadata=jobs.metadata) for _ in range(SUBSCRIBERS)]
    try:
        # A first event proves every stream subscribed and caught up (its one catch-up read).
        first = await jobs.create()
        for call in calls:
            assert (await _read(call)).job_id == first.job_id
        assert app.event_hub.subscribers == SUBSCRIBERS
        with log_reads(app.engine) as reads:
            created = [await jobs.create() for _ in range(3)]
            for call in calls:
                got = [(await _read(call)).job_id for _ in created]
                assert got == [job.job_id for job in created]
        assert reads["other"] == 0, "a subscriber read the log itself"
        assert reads["hub"] >= 1
    finally:
        for call in calls:
            call.cancel()

"""Streams that want the same job types share one claim per dispatch round: scarce work is dealt
out across them, no job goes to two of them, and a round over idle streams costs one query."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from devtools.harness.runtime_client import JobClient
from scheduler_service.services.dispatch import StreamSession
from tests.support.db_checks import job_row
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql


@contextmanager
def statements(engine: AsyncEngine) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)


async def test_scarce_jobs_are_dealt_across_runtimes_once_each(
    scheduler: RunningScheduler,
) -> None:
    jobs = JobClient(scheduler.channel)
    created = {(await jobs.create()).job_id for _ in range(5)}
    protocol = scheduler.app.runtime
    shares = await scheduler.app.uow.run(
        lambda tx: protocol.leasing.claim_within(
            tx, ["synthetic_echo"], [("rt-a", 4), ("rt-b", 4), ("rt-c", 0)]
        )
    )
    assert [len(share) for share in shares] == [3, 2, 0]
    leased = [lease.job_id for share in shares for lease in share]
    assert sorted(leased) == sorted(created)
    for holder, share in zip(("rt-a", "rt-b"), shares, strict=False):
        for lease in share:
            row = await job_row(scheduler.app.engine, lease.job_id)
            assert (row["lifecycleStatus"], row["lockedBy"]) == ("running", holder)
            assert lease.attempt_no == row["attemptCount"] == 1


async def test_a_round_over_many_idle_streams_is_one_query(scheduler: RunningScheduler) -> None:
    dispatcher = scheduler.app.dispatcher
    await dispatcher.stop()  # rounds run here only, so the count is this round's
    sessions = [StreamSession(f"rt-{i}", frozenset({"synthetic_echo"}), 4) for i in range(200)]
    for session in sessions:
        dispatcher.attach(session)
    try:
        with statements(scheduler.app.engine) as seen:
            more = await dispatcher._dispatch_round()
        assert not more
        claims = [s for s in seen if "SKIP LOCKED" in s]
        assert len(claims) == 1, claims
    finally:
        for session in sessions:
            dispatcher.detach(session)

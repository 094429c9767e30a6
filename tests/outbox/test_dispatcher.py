"""The outbox dispatcher on real MariaDB: racing replicas, crashes, poison events, re-drive.

Most tests run both ways a round can go: claim, deliver and publish in two transactions (sinks
that may be slow or fail), and in one (only immediate sinks, the scheduler's own case)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.core.errors import DatabaseBusyError
from scheduler_service.core.events import EventType
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.job_stats import queue_stats, redrive_dead_events
from scheduler_service.sql.outbox_dispatcher import ClaimedEvent, DispatchWaker, OutboxDispatcher
from scheduler_service.sql.uow import SqlUnitOfWork
from tests.support.db_checks import OUTBOX

pytestmark = pytest.mark.mysql


class SimulatedCrash(BaseException):
    """Stands for the process dying: nothing after it runs, no handler catches it."""


class Recorder:
    def __init__(
        self,
        crash_on: set[int] | None = None,
        fail_on: set[int] | None = None,
        *,
        immediate: bool = False,
    ) -> None:
        self.immediate = immediate
        self.event_types: frozenset[EventType] | None = None  # every type
        self.delivered: Counter[int] = Counter()
        self.crash_on = crash_on or set()
        self.fail_on = fail_on or set()

    async def deliver(self, event: ClaimedEvent) -> None:
        if event.id in self.fail_on:
            raise ConnectionError("subscriber endpoint refused")
        self.delivered[event.id] += 1
        if event.id in self.crash_on:
            self.crash_on.discard(event.id)
            raise SimulatedCrash


both_ways = pytest.mark.parametrize(
    "immediate", [False, True], ids=["claim-then-publish", "one-transaction"]
)


async def _insert_events(
    engine: AsyncEngine, count: int, event_type: str = "ai.job.completed"
) -> list[int]:
    rows = [
        {
            "eventType": event_type,
            "aggregateType": "AiJob",
            "aggregateId": f"job-{i}",
            "dedupeKey": f"{event_type}:job-{i}",
            "payload": {"jobId": f"job-{i}", "jobType": "synthetic_echo"},
            "status": "pending",
            "attemptCount": 0,
            "availableAt": db_now(),
            "createdAt": db_now(),
        }
        for i in range(count)
    ]
    async with engine.begin() as conn:
        for start in range(0, count, 1_000):
            await conn.execute(insert(OUTBOX).values(rows[start : start + 1_000]))
        return list((await conn.execute(select(OUTBOX.c.id).order_by(OUTBOX.c.id))).scalars())


async def _statuses(engine: AsyncEngine) -> dict[str, int]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(OUTBOX.c.status, func.count()).group_by(OUTBOX.c.status))
        return {str(s): int(n) for s, n in rows}


def _dispatcher(engine: AsyncEngine, name: str, sink: Any, **kw: Any) -> OutboxDispatcher:
    values: dict[str, Any] = {
        "instance_id": name,
        "batch": 50,
        "processing_timeout_s": 60,
        "backoff_base_ms": 1,
    }
    values.update(kw)
    return OutboxDispatcher(SqlUnitOfWork(engine), [sink], **values)


async def _drain(
    dispatchers: list[OutboxDispatcher], engine: AsyncEngine, total: int, deadline_s: float = 120
) -> None:
    """Run every dispatcher's rounds concurrently until all events are published (or dead)."""
    end = time.monotonic() + deadline_s

    async def loop(dispatcher: OutboxDispatcher) -> None:
        while time.monotonic() < end:
            try:
                if await dispatcher.run_once() == 0:
                    statuses = await _statuses(engine)
                    if statuses.get("published", 0) + statuses.get("dead", 0) == total:
                        return
                    await asyncio.sleep(0.02)  # idle poll while claims time out
            except SimulatedCrash:
                return  # this replica died mid-round

    await asyncio.gather(*(loop(d) for d in dispatchers))


@both_ways
async def test_two_dispatchers_deliver_five_thousand_events_once(
    mysql_engine: AsyncEngine, immediate: bool
) -> None:
    ids = await _insert_events(mysql_engine, 5_000)
    sinks = [Recorder(immediate=immediate), Recorder(immediate=immediate)]
    await _drain(
        [_dispatcher(mysql_engine, f"d{i}", s) for i, s in enumerate(sinks)], mysql_engine, 5_000
    )
    delivered = sinks[0].delivered + sinks[1].delivered
    assert set(delivered) == set(ids)
    assert max(delivered.values()) == 1, "an event was delivered twice without a crash"
    assert sinks[0].delivered and sinks[1].delivered, "both replicas took part"
    assert await _statuses(mysql_engine) == {"published": 5_000}
    async with mysql_engine.connect() as conn:
        positions = sorted((await conn.execute(select(OUTBOX.c.publishedSeq))).scalars())
    assert positions == list(range(1, 5_001))


@both_ways
async def test_a_crash_between_delivering_and_marking_only_duplicates_that_batch(
    mysql_engine: AsyncEngine, immediate: bool
) -> None:
    ids = await _insert_events(mysql_engine, 1_000)
    crashing = Recorder(crash_on={ids[20]}, immediate=immediate)
    survivor = Recorder(immediate=immediate)
    first = _dispatcher(mysql_engine, "crashes", crashing, processing_timeout_s=1)
    second = _dispatcher(mysql_engine, "survives", survivor, processing_timeout_s=1)
    # The crashing replica's round runs first and alone, so it is the one that claims the oldest
    # batch and dies in it whatever the machine's load; the survivor then drains everything.
    with pytest.raises(SimulatedCrash):
        await first.run_once()
    assert set(crashing.delivered) == set(ids[:21])
    await _drain([second], mysql_engine, 1_000)
    delivered = crashing.delivered + survivor.delivered
    assert set(delivered) == set(ids)
    duplicated = {event_id for event_id, n in delivered.items() if n > 1}
    assert ids[20] in duplicated
    # Only events the crashed round had delivered before dying are delivered again.
    assert duplicated <= set(crashing.delivered)
    assert await _statuses(mysql_engine) == {"published": 1_000}
    async with mysql_engine.connect() as conn:
        attempts = (await conn.execute(select(func.max(OUTBOX.c.attemptCount)))).scalar_one()
    assert attempts == 0  # a crash is not a failed delivery (S10)


@both_ways
async def test_poison_event_goes_dead_after_three_attempts_and_is_redriven(
    mysql_engine: AsyncEngine, immediate: bool
) -> None:
    ids = await _insert_events(mysql_engine, 20)
    poison = ids[7]
    sink = Recorder(fail_on={poison}, immediate=immediate)
    dispatcher = _dispatcher(mysql_engine, "d", sink)
    await _drain([dispatcher], mysql_engine, 20)
    assert await _statuses(mysql_engine) == {"published": 19, "dead": 1}
    async with mysql_engine.connect() as conn:
        row = (await conn.execute(select(OUTBOX).where(OUTBOX.c.id == poison))).one()
    assert (row.status, row.attemptCount) == ("dead", 3)
    assert "refused" in row.lastError
    assert set(sink.delivered) == set(ids) - {poison}  # no head-of-line blocking
    assert (await queue_stats(SqlUnitOfWork(mysql_engine))).dead_events == 1
    for _ in range(3):  # dead stays dead: no fourth attempt by itself
        assert await dispatcher.run_once() == 0
    sink.fail_on.clear()
    assert await redrive_dead_events(SqlUnitOfWork(mysql_engine), [poison]) == 1
    await _drain([dispatcher], mysql_engine, 20)
    assert sink.delivered[poison] == 1
    assert await _statuses(mysql_engine) == {"published": 20}
    assert (await queue_stats(SqlUnitOfWork(mysql_engine))).dead_events == 0


@both_ways
async def test_unknown_event_types_are_published_without_delivery(
    mysql_engine: AsyncEngine, immediate: bool
) -> None:
    await _insert_events(mysql_engine, 3, event_type="ai.job.mystery")
    sink = Recorder(immediate=immediate)
    await _drain([_dispatcher(mysql_engine, "d", sink)], mysql_engine, 3)
    assert not sink.delivered
    assert await _statuses(mysql_engine) == {"published": 3}


@both_ways
async def test_what_another_connection_sees_during_a_delivery(
    mysql_engine: AsyncEngine, immediate: bool
) -> None:
    """Two transactions: the claim has committed, the event is ``processing`` while it is
    delivered. One: nothing has committed yet, the event is still ``pending`` (a round that does
    not commit leaves it there)."""
    (event_id,) = await _insert_events(mysql_engine, 1)
    seen: list[str] = []

    class Looking(Recorder):
        async def deliver(self, event: ClaimedEvent) -> None:
            async with mysql_engine.connect() as conn:
                query = select(OUTBOX.c.status).where(OUTBOX.c.id == event.id)
                seen.append(str((await conn.execute(query)).scalar_one()))

    assert await _dispatcher(mysql_engine, "d", Looking(immediate=immediate)).run_once() == 1
    assert seen == ["pending" if immediate else "processing"]
    assert await _statuses(mysql_engine) == {"published": 1}
    async with mysql_engine.connect() as conn:
        row = (await conn.execute(select(OUTBOX).where(OUTBOX.c.id == event_id))).one()
    assert (row.publishedSeq, row.attemptCount, row.lockedBy) == (1, 0, None)


async def test_the_schedulers_own_sink_is_immediate() -> None:
    assert DispatchWaker(lambda: None, lambda _job_id: False).immediate


async def test_a_publish_that_cannot_commit_hands_its_events_back_at_once(
    mysql_engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A publish that fails (a cluster conflict past its budget) leaves nothing in
    processing for the claim timeout: the events are pending again, their attempts untouched."""
    await _insert_events(mysql_engine, 10)
    dispatcher = _dispatcher(mysql_engine, "unlucky", Recorder(), processing_timeout_s=3_600)

    async def refused(events: Any) -> int:
        raise DatabaseBusyError("the database is busy, try again")

    monkeypatch.setattr(dispatcher, "publish", refused)
    with pytest.raises(DatabaseBusyError):
        await dispatcher.run_once()
    assert await _statuses(mysql_engine) == {"pending": 10}
    async with mysql_engine.connect() as conn:
        attempts = (await conn.execute(select(func.max(OUTBOX.c.attemptCount)))).scalar_one()
    assert attempts == 0


async def test_a_conflict_past_the_budget_is_busy_not_internal(mysql_engine: AsyncEngine) -> None:
    """A transaction that keeps losing (deadlock, lock wait, Galera certification
    conflict: errno 1213) is re-run, then given up as DatabaseBusyError (UNAVAILABLE,
    PLATFORM_UNAVAILABLE), never left to surface as INTERNAL."""
    runs = 0

    async def always_conflicts(tx: Any) -> None:
        nonlocal runs
        runs += 1
        raise OperationalError("COMMIT", {}, Exception(1213, "Deadlock found"))

    uow = SqlUnitOfWork(mysql_engine, attempts=4, base_delay_s=0.0001)
    with pytest.raises(DatabaseBusyError) as busy:
        await uow.run(always_conflicts)
    assert runs == 4
    assert (busy.value.status, busy.value.code) == ("UNAVAILABLE", "PLATFORM_UNAVAILABLE")

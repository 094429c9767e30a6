"""The watch hub: however many WatchJob streams are open, an idle replica reads the
watched jobs once per interval; a watcher reads its job again only when it moved (a change made
through another replica, found by the hub's read) or at once when this replica changed it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from scheduler_service.core.records import JobRecord
from scheduler_service.ports import JobReads
from scheduler_service.services.jobs import JobService
from scheduler_service.services.watch_hub import WatchHub
from tests.services.test_job_service import command
from tests.support.fake_stores import FakeJobReads
from tests.support.fake_uow import FakeUnitOfWork

WATCHERS = 50


class _Reads:
    """Counts the store reads the watchers and the hub make."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, store: type[JobReads]) -> None:
        self.gets = 0
        self.state_reads = 0
        get, states = store.get, store.watch_states

        async def counted_get(this: Any, job_id: str) -> Any:
            self.gets += 1
            return await get(this, job_id)

        async def counted_states(this: Any, job_ids: Any) -> Any:
            self.state_reads += 1
            return await states(this, job_ids)

        monkeypatch.setattr(store, "get", counted_get)
        monkeypatch.setattr(store, "watch_states", counted_states)


async def _next(updates: AsyncIterator[JobRecord]) -> JobRecord:
    return await anext(updates)


async def test_idle_watchers_cost_one_read_per_round_and_wake_only_when_their_job_moves(
    jobs: JobService, uow: FakeUnitOfWork, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub = WatchHub(uow, interval_s=3600)  # rounds are run by hand below
    created = [(await jobs.create(command(f"user-{i}")))[0] for i in range(WATCHERS)]
    streams = [jobs.watch(job.userId, job.id, changed=hub.changed) for job in created]
    for stream in streams:
        assert (await _next(stream)).lifecycleStatus.value == "queued"
    pending = [asyncio.ensure_future(_next(stream)) for stream in streams]
    # One turn of the event loop: each watcher runs to its registration with the hub and waits
    # there (a yield to the ready tasks, not a wait for time).
    await asyncio.sleep(0)
    reads = _Reads(monkeypatch, FakeJobReads)
    for _ in range(3):
        await hub._round()
    assert (reads.state_reads, reads.gets) == (3, 0)
    assert hub.watched_jobs == WATCHERS and not any(p.done() for p in pending)

    # Another replica cancels one job: the next round finds it; only its watcher reads again.
    moved = created[7]
    uow.state.jobs[moved.id]["lifecycleStatus"] = "cancelled"
    await hub._round()
    update = await pending[7]
    assert update.lifecycleStatus.value == "cancelled" and reads.gets == 1
    assert sum(p.done() for p in pending) == 1

    # This replica changes one: its watcher wakes at once, without a hub round.
    touched = created[3]
    uow.state.jobs[touched.id]["progress"] = 42
    hub.touch(touched.id)
    assert (await pending[3]).progress == 42 and reads.state_reads == 4
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for stream in streams:
        await stream.aclose()
    assert hub.watched_jobs == 0


async def test_many_watchers_of_one_job_share_one_read_per_change(
    jobs: JobService, uow: FakeUnitOfWork, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2,000 watchers of one job cost ~1,436 reads per progress change."""
    hub = WatchHub(uow, interval_s=3600)
    job, _ = await jobs.create(command("user-fan"))
    streams = [
        jobs.watch(job.userId, job.id, changed=hub.changed, current=hub.current) for _ in range(500)
    ]
    for stream in streams:
        await _next(stream)
    pending = [asyncio.ensure_future(_next(stream)) for stream in streams]
    await asyncio.sleep(0)  # each watcher runs to its registration with the hub
    reads = _Reads(monkeypatch, FakeJobReads)
    uow.state.jobs[job.id]["progress"] = 30
    hub.touch(job.id)
    assert {(await p).progress for p in pending} == {30}
    assert reads.gets == 1

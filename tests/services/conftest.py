"""Fixtures of the service tests: the job and protocol services over the in-memory unit of work.

No database: these run in the fast tier (``make test-fast``).
"""

from __future__ import annotations

import random

import pytest

from scheduler_service.core.commands import JobLimits
from scheduler_service.ports import Wakeups
from scheduler_service.services.jobs import JobService
from scheduler_service.services.reaper import Reaper
from scheduler_service.services.runtime_pieces import RuntimePieces, runtime_pieces
from tests.support.fake_uow import FakeUnitOfWork
from tests.support.schedulers import fast_registry


class WakeupLog(Wakeups):
    """Wake-ups that record what they were told, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []
        self.dispatch = lambda _job_ids: self.seen.append("dispatch")
        self.outbox = lambda event_type: self.seen.append(f"outbox:{event_type.value}")
        self.job_changed = lambda job_id: self.seen.append(f"changed:{job_id}")
        self.job_ended = lambda job_id: self.seen.append(f"ended:{job_id}")
        self.cancel_requested = lambda job_id: self.seen.append(f"cancel:{job_id}")


@pytest.fixture
def wakeups() -> WakeupLog:
    return WakeupLog()


@pytest.fixture
def uow(wakeups: WakeupLog) -> FakeUnitOfWork:
    return FakeUnitOfWork(wakeups=wakeups, ttl_ms=10_000, grace_ms=30_000)


@pytest.fixture
def jobs(uow: FakeUnitOfWork) -> JobService:
    return JobService(uow, fast_registry(), limits=JobLimits(max_active_jobs_per_user=5))


@pytest.fixture
def protocol(uow: FakeUnitOfWork) -> RuntimePieces:
    return runtime_pieces(uow, fast_registry(), rng=random.Random(7))


@pytest.fixture
def reaper(uow: FakeUnitOfWork, protocol: RuntimePieces) -> Reaper:
    return Reaper(uow, protocol.settlement)

"""The in-memory tables of the fast tests' unit of work, and the clock the tests move."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler_service.core.breakers import Breaker, BreakerKey
from scheduler_service.core.budgets import Spend
from scheduler_service.core.events import EventType
from scheduler_service.core.guards import Moment
from scheduler_service.core.model_keys import KeyState, ModelKey, ModelKeyLimits
from scheduler_service.core.records import ArtifactRow
from scheduler_service.core.routes import ModelTier
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.core.usage import Usage

__all__ = ["QUEUED", "RUNNING", "FakeClock", "FakeEvent", "FakeState", "FakeTables", "Row"]

Row = dict[str, Any]
QUEUED, RUNNING = LifecycleStatus.QUEUED.value, LifecycleStatus.RUNNING.value


@dataclass
class FakeClock:
    """The "database clock" of the fake: it moves only when the test moves it."""

    now: datetime = field(default_factory=lambda: datetime(2026, 1, 1, tzinfo=UTC))

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class FakeEvent:
    event_type: EventType
    job_id: str
    job_type: str
    payload: dict[str, Any]


@dataclass
class FakeState:
    """Everything committed: the tables the services touch."""

    jobs: dict[str, Row] = field(default_factory=dict)
    snapshots: dict[str, tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict)
    events: list[FakeEvent] = field(default_factory=list)
    artifacts: dict[str, list[ArtifactRow]] = field(default_factory=dict)
    usage: list[tuple[str, int, Usage, str | None]] = field(default_factory=list)
    #: The gate rows' fair-dispatch places, by user.
    fair_lasts: dict[str, int] = field(default_factory=dict)
    #: Spend per (user, UTC day), and budgets operators set per user (tokens, cost).
    spend: dict[tuple[str, str], Spend] = field(default_factory=dict)
    budgets: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: The model keys' flow state, their operator-set limits and 429 counts.
    keys: dict[ModelKey, KeyState] = field(default_factory=dict)
    key_limits: dict[ModelKey, ModelKeyLimits] = field(default_factory=dict)
    rate_limited: dict[ModelKey, int] = field(default_factory=dict)
    #: Output chunks' text by (job, attempt, offset).
    chunks: dict[tuple[str, int, int], str] = field(default_factory=dict)
    #: The model keys' circuit breakers (with the times each opened) and operators' routes.
    breakers: dict[BreakerKey, tuple[Breaker, int]] = field(default_factory=dict)
    routes: dict[str, tuple[ModelTier, ...]] = field(default_factory=dict)

    def copy(self) -> FakeState:
        """A working copy: rows are copied, their values (never mutated in place) shared."""
        return FakeState(
            jobs={job_id: dict(row) for job_id, row in self.jobs.items()},
            snapshots=dict(self.snapshots),
            events=list(self.events),
            artifacts=dict(self.artifacts),
            usage=list(self.usage),
            fair_lasts=dict(self.fair_lasts),
            spend=dict(self.spend),
            budgets=dict(self.budgets),
            keys=dict(self.keys),
            key_limits=dict(self.key_limits),
            rate_limited=dict(self.rate_limited),
            chunks=dict(self.chunks),
            breakers=dict(self.breakers),
            routes=dict(self.routes),
        )


class FakeTables:
    """What every in-memory store shares: the transaction's tables, the clock, the lease times."""

    def __init__(self, state: FakeState, clock: FakeClock, *, ttl_ms: int, grace_ms: int) -> None:
        self.state = state
        self._clock = clock
        self.ttl_ms = ttl_ms
        self.grace_ms = grace_ms

    @property
    def now(self) -> datetime:
        return self._clock.now

    @property
    def moment(self) -> Moment:
        return Moment(self._clock.now, self.ttl_ms, self.grace_ms)

    def ms_from_now(self, milliseconds: int) -> datetime:
        return self._clock.now + timedelta(milliseconds=milliseconds)

    def day(self) -> str:
        return self._clock.now.date().isoformat()

    def user_rows(self, user_id: str) -> list[Row]:
        return [r for r in self.state.jobs.values() if r["userId"] == user_id]

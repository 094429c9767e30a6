"""Model routes and circuit breakers on the in-memory tables (as sql/route_store.py)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

from scheduler_service.core.breakers import (
    Breaker,
    BreakerKey,
    BreakerPolicy,
    BreakerState,
    after_failure,
    after_success,
    reset,
)
from scheduler_service.core.routes import ModelTier
from scheduler_service.ports.routes import RouteStore
from tests.support.fake_state import FakeTables


class FakeRouteStore(FakeTables, RouteStore):
    async def breaker_failed(self, key: BreakerKey, code: str, policy: BreakerPolicy) -> Breaker:
        before, opened = self.state.breakers.get(key, (Breaker(), 0))
        after = after_failure(before, code, self.now, policy)
        newly = after.state is BreakerState.OPEN and before.state is not BreakerState.OPEN
        self.state.breakers[key] = (after, opened + int(newly))
        return after

    async def breakers_answered(self, keys: Collection[BreakerKey]) -> None:
        for key in keys:
            if key in self.state.breakers:
                breaker, opened = self.state.breakers[key]
                self.state.breakers[key] = (after_success(breaker), opened)

    async def reset_breaker(self, key: BreakerKey) -> bool:
        if key not in self.state.breakers:
            return False
        breaker, opened = self.state.breakers[key]
        self.state.breakers[key] = (reset(breaker), opened)
        return breaker != reset(breaker)

    async def breakers(self) -> tuple[datetime, Mapping[BreakerKey, tuple[Breaker, int]]]:
        return self.now, dict(self.state.breakers)

    async def routes(self) -> Mapping[str, tuple[ModelTier, ...]]:
        return dict(self.state.routes)

    async def put_route(self, job_type: str, tiers: Sequence[ModelTier]) -> None:
        if tiers:
            self.state.routes[job_type] = tuple(tiers)
        else:
            self.state.routes.pop(job_type, None)

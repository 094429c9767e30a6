"""Model routes and circuit breakers (core/routes.py, core/breakers.py): the operators' routes
per job type and one breaker per model key, shared by every replica through the store."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

from scheduler_service.core.breakers import Breaker, BreakerKey, BreakerPolicy
from scheduler_service.core.routes import ModelTier

__all__ = ["RouteStore"]


class RouteStore(ABC):
    @abstractmethod
    async def breaker_failed(self, key: BreakerKey, code: str, policy: BreakerPolicy) -> Breaker:
        """A call on ``key`` failed with ``code``: its breaker after it (core/breakers.py)."""

    @abstractmethod
    async def breakers_answered(self, keys: Collection[BreakerKey]) -> None:
        """Calls on ``keys`` answered: their breakers close (a held one waits for its
        operator)."""

    @abstractmethod
    async def reset_breaker(self, key: BreakerKey) -> bool:
        """An operator closes ``key``'s breaker; whether it was open or counting failures."""

    @abstractmethod
    async def breakers(self) -> tuple[datetime, Mapping[BreakerKey, tuple[Breaker, int]]]:
        """Every breaker that ever counted a failure, with the times it opened, and now."""

    @abstractmethod
    async def routes(self) -> Mapping[str, tuple[ModelTier, ...]]:
        """The operators' routes, by job type."""

    @abstractmethod
    async def put_route(self, job_type: str, tiers: Sequence[ModelTier]) -> None:
        """Set a job type's route (no tiers: remove the operator's)."""

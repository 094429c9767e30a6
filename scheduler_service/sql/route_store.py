"""Model routes and circuit breakers on SQL (``AiModelRoute``, ``AiModelBreaker``)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.core.breakers import Breaker, BreakerKey, BreakerPolicy
from scheduler_service.core.routes import ModelTier
from scheduler_service.ports.routes import RouteStore
from scheduler_service.sql import route_statements as route_sql

__all__ = ["SqlRouteStore"]


class SqlRouteStore(RouteStore):
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def breaker_failed(self, key: BreakerKey, code: str, policy: BreakerPolicy) -> Breaker:
        return await route_sql.breaker_failed(self._conn, key, code, policy)

    async def breakers_answered(self, keys: Collection[BreakerKey]) -> None:
        await route_sql.answered(self._conn, keys)

    async def reset_breaker(self, key: BreakerKey) -> bool:
        return await route_sql.reset_breaker(self._conn, key)

    async def breakers(self) -> tuple[datetime, Mapping[BreakerKey, tuple[Breaker, int]]]:
        return await route_sql.all_breakers(self._conn)

    async def routes(self) -> Mapping[str, tuple[ModelTier, ...]]:
        return await route_sql.routes(self._conn)

    async def put_route(self, job_type: str, tiers: Sequence[ModelTier]) -> None:
        await route_sql.put_route(self._conn, job_type, tiers)

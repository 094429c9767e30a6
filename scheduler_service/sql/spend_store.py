"""Usage, spend and budgets on SQL: the ledger (``AiUsageLog``), each day's spend and budgets."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.core.budgets import Budget, Spend, Standing
from scheduler_service.core.model_keys import ModelKey
from scheduler_service.core.usage import UsageEntry, UsageLine
from scheduler_service.ports import SpendStore
from scheduler_service.sql import spend_statements as billing_sql
from scheduler_service.sql.db.clock import db_today
from scheduler_service.sql.usage_log import record_usages

__all__ = ["SqlSpendStore"]


class SqlSpendStore(SpendStore):
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def record_usages(self, entries: Sequence[UsageEntry]) -> None:
        await record_usages(self._conn, entries)

    async def over_budget(self, user_ids: Collection[str], budget: Budget) -> set[str]:
        return await billing_sql.over_budget(self._conn, user_ids, budget)

    async def budget_standings(
        self, user_ids: Collection[str], budget: Budget, reserving: Collection[str]
    ) -> dict[str, Standing]:
        return await billing_sql.budget_standings(self._conn, user_ids, budget, reserving)

    async def over_budget_queued(
        self, budget: Budget, *, limit: int = 100
    ) -> list[tuple[str, str]]:
        return await billing_sql.over_budget_queued(self._conn, budget, limit=limit)

    async def put_budget(self, user_id: str, tokens: int, cost_micros: int) -> None:
        await billing_sql.put_budget(self._conn, user_id, tokens, cost_micros)

    async def budget_of(self, user_id: str) -> tuple[int | None, int | None]:
        return await billing_sql.read_budget(self._conn, user_id)

    async def spend_today(self, user_id: str) -> Spend:
        return await billing_sql.spend_today(self._conn, user_id)

    async def today(self) -> datetime:
        value = (await self._conn.execute(select(db_today()))).scalar_one()
        # A datetime on MariaDB, its text on SQLite.
        return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))

    async def usage_report(
        self, user_id: str, start: datetime, end: datetime, user_key_mode: str
    ) -> tuple[UsageLine, dict[ModelKey, UsageLine]]:
        return await billing_sql.usage_report(self._conn, user_id, start, end, user_key_mode)

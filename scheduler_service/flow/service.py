"""The operators' side of model keys: set limits, list them, read each key's flow state."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from scheduler_service.errors import InvalidRequestError
from scheduler_service.flow import sql as flow_sql
from scheduler_service.flow.keys import (
    PLATFORM,
    USER,
    FlowPolicy,
    Limits,
    ModelKey,
    spent,
    trimmed,
)
from scheduler_service.uow import SqlTransaction, SqlUnitOfWork

__all__ = ["KeyStats", "ModelKeys"]

_NAME = re.compile(r"[A-Za-z0-9._:/-]+")
_INT32 = 2**31 - 1


@dataclass(frozen=True, slots=True)
class KeyStats:
    key: ModelKey
    limits: Limits  # as set; 0 takes the default
    in_flight: int
    effective_concurrency: int  # 0: none
    paused_until: datetime | None
    rate_limited_total: int
    rate_limited_last_minute: int
    cost_today_micros: int


def _name(value: str, field: str, limit: int) -> str:
    if not value or len(value) > limit or not _NAME.fullmatch(value):
        raise InvalidRequestError(
            f"{field} must be 1-{limit} characters of letters, digits and ._:/-", field=field
        )
    return value


def checked_key(provider: str, model: str, scope: str) -> ModelKey:
    if scope not in (PLATFORM, USER):
        raise InvalidRequestError(
            'limit.credential_scope must be "platform" or "user"', field="limit.credential_scope"
        )
    return ModelKey(_name(provider, "limit.provider", 64), _name(model, "limit.model", 128), scope)


def checked_limits(concurrency: int, rpm: int, tpm: int, daily_cost: int = 0) -> Limits:
    for value, field, top in (
        (concurrency, "limit.max_concurrency", _INT32),
        (rpm, "limit.requests_per_minute", _INT32),
        (tpm, "limit.tokens_per_minute", 2**63 - 1),
        (daily_cost, "limit.daily_cost_micros", 2**63 - 1),
    ):
        if not 0 <= value <= top:
            raise InvalidRequestError(f"{field} must be 0 or more", field=field)
    return Limits(concurrency, rpm, tpm, daily_cost)


class ModelKeys:
    def __init__(self, uow: SqlUnitOfWork, flow: FlowPolicy) -> None:
        self._uow = uow
        self._flow = flow

    async def put(self, key: ModelKey, limits: Limits) -> None:
        async def put(tx: SqlTransaction) -> None:
            await flow_sql.put_limits(tx.conn, key, limits)

        await self._uow.run(put)

    async def stats(self) -> list[KeyStats]:
        async def read(tx: SqlTransaction) -> list[KeyStats]:
            now, rows = await flow_sql.read_keys(tx.conn)
            keys = {flow_sql.key_of(row) for row in rows}
            running = await flow_sql.running_by_key(tx.conn, self._flow.user_key_mode, keys)
            found = []
            for row in rows:
                key, set_limits = flow_sql.key_of(row), flow_sql.limits_of(row)
                state = flow_sql.state_of(row, self._flow.defaults, now)
                paused = row.pausedUntil if row.pausedUntil and row.pausedUntil > now else None
                found.append(
                    KeyStats(
                        key,
                        set_limits,
                        running.get(key, 0),
                        state.concurrency(),
                        paused,
                        int(row.rateLimitedTotal),
                        spent(trimmed(state.rate_limited, now)),
                        state.cost_today,
                    )
                )
            return found

        return await self._uow.read(read)

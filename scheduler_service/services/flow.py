"""The operators' side of model keys: set limits, list them, read each key's flow state."""

from __future__ import annotations

import re

from scheduler_service.core.errors import InvalidRequestError
from scheduler_service.core.model_keys import (
    PLATFORM,
    USER,
    FlowPolicy,
    KeyStats,
    ModelKey,
    ModelKeyLimits,
    key_model,
)
from scheduler_service.ports import UnitOfWork

__all__ = ["ModelKeys", "checked_key", "checked_limits"]

_NAME = re.compile(r"[A-Za-z0-9._:/-]+")
_INT32 = 2**31 - 1


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
    model = key_model(_name(model, "limit.model", 128))
    return ModelKey(_name(provider, "limit.provider", 64), model, scope)


def checked_limits(
    concurrency: int, rpm: int, tpm: int, daily_cost: int = 0, per_user: int = 0
) -> ModelKeyLimits:
    for value, field, top in (
        (concurrency, "limit.max_concurrency", _INT32),
        (rpm, "limit.requests_per_minute", _INT32),
        (tpm, "limit.tokens_per_minute", 2**63 - 1),
        (daily_cost, "limit.daily_cost_micros", 2**63 - 1),
        (per_user, "limit.max_concurrency_per_user", _INT32),
    ):
        if not 0 <= value <= top:
            raise InvalidRequestError(f"{field} must be 0 or more", field=field)
    return ModelKeyLimits(concurrency, rpm, tpm, daily_cost, per_user)


class ModelKeys:
    def __init__(self, uow: UnitOfWork, flow: FlowPolicy) -> None:
        self._uow = uow
        self._flow = flow

    async def put(self, key: ModelKey, limits: ModelKeyLimits) -> None:
        await self._uow.run(lambda tx: tx.keys.put_limits(key, limits))

    async def stats(self) -> list[KeyStats]:
        return await self._uow.read(lambda tx: tx.keys.stats(self._flow))

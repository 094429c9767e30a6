"""The model keys on SQL: limits and flow state in ``AiModelKey``, one row per key, read by every
claim under its lock so that all replicas spend one budget (core/model_keys.py)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.core.model_keys import (
    FlowPolicy,
    KeyState,
    ModelKey,
    ModelKeyLimits,
    Window,
    claim_locks,
    key_model,
    scope_of,
)
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.driver import write_later
from scheduler_service.sql.db.hints import running_rows_by_index
from scheduler_service.sql.db.idempotent import insert_ignoring_duplicates
from scheduler_service.sql.db.models import AiJob, AiModelKey

__all__ = [
    "claim_states",
    "congested",
    "congested_keys",
    "lock_keys",
    "lock_states",
    "put_limits",
    "read_keys",
    "running_by_key",
    "save_states",
    "state_of",
]

_k = cast(Table, AiModelKey.__table__)
_j = cast(Table, AiJob.__table__)

_ALL_LOCKED = (
    select(_k, db_now().label("dbNow"))
    .order_by(_k.c.provider, _k.c.model, _k.c.credentialScope)
    .with_for_update()
)
_ALL = select(_k).order_by(_k.c.provider, _k.c.model, _k.c.credentialScope)
_ALL_UNLOCKED = select(_k, db_now().label("dbNow"))
_NOW = select(db_now())
_ONE_LOCKED = (
    select(_k, db_now().label("dbNow"))
    .where(
        _k.c.provider == bindparam("b_provider"),
        _k.c.model == bindparam("b_model"),
        _k.c.credentialScope == bindparam("b_scope"),
    )
    .with_for_update()
)
_CONGESTED_LOCKED = (
    select(_k, db_now().label("dbNow"))
    .where(_k.c.effectiveConcurrency.is_not(None))
    .order_by(_k.c.provider, _k.c.model, _k.c.credentialScope)
    .with_for_update()
)
_RUNNING_BY_KEY = running_rows_by_index(
    select(_j.c.modelProvider, _j.c.modelName, _j.c.credentialMode, func.count())
    .where(_j.c.lifecycleStatus == LifecycleStatus.RUNNING.value)
    .group_by(_j.c.modelProvider, _j.c.modelName, _j.c.credentialMode)
)
_SAVE = (
    update(_k)
    .where(
        _k.c.provider == bindparam("b_provider"),
        _k.c.model == bindparam("b_model"),
        _k.c.credentialScope == bindparam("b_scope"),
    )
    .values(
        pausedUntil=bindparam("v_paused"),
        effectiveConcurrency=bindparam("v_effective"),
        requestWindow=bindparam("v_requests"),
        tokenWindow=bindparam("v_tokens"),
        rateLimitedWindow=bindparam("v_limited_window"),
        rateLimitedTotal=_k.c.rateLimitedTotal + bindparam("v_limited"),
        growthThreshold=bindparam("v_threshold"),
        firstTokenWindow=bindparam("v_first_tokens"),
        decreasedAt=bindparam("v_decreased"),
        updatedAt=db_now(),
    )
)


def key_of(row: Any) -> ModelKey:
    return ModelKey(row.provider, row.model, row.credentialScope)


def limits_of(row: Any) -> ModelKeyLimits:
    return ModelKeyLimits(
        row.maxConcurrency or 0,
        row.requestsPerMinute or 0,
        int(row.tokensPerMinute or 0),
        int(row.dailyCostMicros or 0),
        int(row.maxConcurrencyPerUser or 0),
    )


def cost_today(row: Any, now: datetime | None) -> int:
    """What the key cost on ``now``'s UTC day (the row counts one day at a time)."""
    if now is None or row.costDay is None or row.costDay.date() != now.date():
        return 0
    return int(row.costToday or 0)


def state_of(row: Any, flow: FlowPolicy, now: datetime | None = None) -> KeyState:
    key, set_limits = key_of(row), limits_of(row)
    return KeyState(
        flow.limits(key, set_limits),
        row.pausedUntil,
        row.effectiveConcurrency,
        _window(row.requestWindow),
        _window(row.tokenWindow),
        _window(row.rateLimitedWindow),
        row.growthThreshold,
        _window(row.firstTokenWindow),
        row.decreasedAt,
        cost_today(row, now),
        flow.account_limited(key, set_limits),
    )


def _window(text: str | None) -> Window:
    return tuple((int(second), int(amount)) for second, amount in json.loads(text or "[]"))


def _text(window: Window) -> str | None:
    return json.dumps(window, separators=(",", ":")) if window else None


def _new_rows(flow: FlowPolicy, keys: Collection[ModelKey]) -> list[dict[str, Any]]:
    return [
        {
            "provider": k.provider,
            "model": k.model,
            "credentialScope": k.scope,
            "effectiveConcurrency": flow.fresh(),
        }
        for k in sorted(keys)
    ]


async def lock_states(
    conn: AsyncConnection, flow: FlowPolicy, keys: Collection[ModelKey] = ()
) -> tuple[datetime | None, dict[ModelKey, KeyState]]:
    """Every key's state, locked to the end of the transaction, with the database's now. When
    the policy keeps rows (default limits, or a window to grow), ``keys`` without a row get one
    first (so their budgets are shared too)."""
    if flow.keeps_rows and keys:
        await insert_ignoring_duplicates(conn, _k, _new_rows(flow, keys), stamped=("updatedAt",))
    found = (await conn.execute(_ALL_LOCKED)).all()
    if not found:
        return None, {}
    now = found[0].dbNow
    return now, {key_of(row): state_of(row, flow, now) for row in found}


async def claim_states(
    conn: AsyncConnection, flow: FlowPolicy
) -> tuple[datetime | None, dict[ModelKey, KeyState]]:
    """Every key's state for a claim, with the database's now: read without a lock, and read
    again under the rows' locks (``lock_states``) only when some key may refuse a lease or the
    claim may write it (``keys.claim_locks``).

    A key that nothing restricts (no limit, its window grown back to unlimited, no pause) is
    spent without a write, so its lock would only make every claim and every replica wait for
    each other. A limit, pause or window set meanwhile orders after this claim, as it would had
    the claim taken the lock first; and the claim writes no state it read unlocked.

    When strict limits hold by default (``FlowPolicy.limits_by_default``), every key restricts:
    they are read under their locks at once, one statement instead of two."""
    if flow.limits_by_default:
        return await lock_states(conn, flow)
    found = (await conn.execute(_ALL_UNLOCKED)).all()
    if not found:
        return None, {}
    now = found[0].dbNow
    states = {key_of(row): state_of(row, flow, now) for row in found}
    if any(claim_locks(state, now) for state in states.values()):
        return await lock_states(conn, flow)
    return now, states


async def lock_keys(
    conn: AsyncConnection, flow: FlowPolicy, keys: Collection[ModelKey]
) -> tuple[datetime | None, dict[ModelKey, KeyState]]:
    """The states of those ``keys`` that have a row, locked (in key order), with the database's
    now."""
    now, states = None, {}
    for key in sorted(keys):
        found = (
            await conn.execute(
                _ONE_LOCKED,
                {"b_provider": key.provider, "b_model": key.model, "b_scope": key.scope},
            )
        ).one_or_none()
        if found is not None:
            now, states[key] = found.dbNow, state_of(found, flow, found.dbNow)
    return now, states


async def running_by_key(
    conn: AsyncConnection, user_key_mode: str, keys: Collection[ModelKey]
) -> dict[ModelKey, int]:
    """Jobs running per key, for ``keys``."""
    found: dict[ModelKey, int] = {}
    for provider, model, mode, count in await conn.execute(_RUNNING_BY_KEY):
        key = ModelKey(provider, key_model(model), scope_of(mode, user_key_mode))
        if key in keys:
            found[key] = found.get(key, 0) + int(count)
    return found


_RUNNING_BY_USER_AND_KEY = (
    select(_j.c.userId, _j.c.modelProvider, _j.c.modelName, _j.c.credentialMode, func.count())
    .where(
        _j.c.lifecycleStatus == LifecycleStatus.RUNNING.value,
        _j.c.userId.in_(bindparam("b_users", expanding=True)),
    )
    .group_by(_j.c.userId, _j.c.modelProvider, _j.c.modelName, _j.c.credentialMode)
)


async def running_by_user_and_key(
    conn: AsyncConnection, flow: FlowPolicy, users: Collection[str]
) -> Counter[tuple[str, ModelKey]]:
    """Jobs running per (user, key), for ``users``."""
    found: Counter[tuple[str, ModelKey]] = Counter()
    rows = await conn.execute(_RUNNING_BY_USER_AND_KEY, {"b_users": sorted(users)})
    for user, provider, model, mode, count in rows:
        found[(user, flow.key(provider, model, mode))] += int(count)
    return found


async def save_states(
    conn: AsyncConnection,
    states: Mapping[ModelKey, KeyState],
    rate_limited: Mapping[ModelKey, int] | None = None,
) -> None:
    for key, state in sorted(states.items()):
        # Its count answers nothing the caller uses: sent with the transaction's next statement.
        await write_later(
            conn,
            _SAVE,
            {
                "b_provider": key.provider,
                "b_model": key.model,
                "b_scope": key.scope,
                "v_paused": state.paused_until,
                "v_effective": state.effective,
                "v_requests": _text(state.requests),
                "v_tokens": _text(state.tokens),
                "v_limited_window": _text(state.rate_limited),
                "v_limited": (rate_limited or {}).get(key, 0),
                "v_threshold": state.threshold,
                "v_first_tokens": _text(state.first_tokens),
                "v_decreased": state.decreased_at,
            },
        )


async def congested(
    conn: AsyncConnection, key: ModelKey, flow: FlowPolicy
) -> tuple[datetime, KeyState]:
    """The key's state locked (its row made if missing), with the database's now."""
    await insert_ignoring_duplicates(conn, _k, _new_rows(flow, [key]), stamped=("updatedAt",))
    found = (
        await conn.execute(
            _ONE_LOCKED, {"b_provider": key.provider, "b_model": key.model, "b_scope": key.scope}
        )
    ).one()
    return found.dbNow, state_of(found, flow, found.dbNow)


async def congested_keys(
    conn: AsyncConnection, flow: FlowPolicy, keys: Collection[ModelKey]
) -> tuple[datetime | None, dict[ModelKey, KeyState]]:
    """The states of those ``keys`` whose window is below their limit (congestion lowered it,
    or it is still growing), locked, with the database's now (None when there are none)."""
    if not keys:
        return None, {}
    found = (await conn.execute(_CONGESTED_LOCKED)).all()
    states = {key_of(row): state_of(row, flow, row.dbNow) for row in found if key_of(row) in keys}
    return (found[0].dbNow if found else None), states


async def put_limits(conn: AsyncConnection, key: ModelKey, limits: ModelKeyLimits) -> None:
    """Set a key's limits (0: the default); its congestion state is kept."""
    row = {"provider": key.provider, "model": key.model, "credentialScope": key.scope}
    await insert_ignoring_duplicates(conn, _k, [row], stamped=("updatedAt",))
    await conn.execute(
        update(_k)
        .where(
            _k.c.provider == key.provider,
            _k.c.model == key.model,
            _k.c.credentialScope == key.scope,
        )
        .values(
            maxConcurrency=limits.max_concurrency or None,
            requestsPerMinute=limits.requests_per_minute or None,
            tokensPerMinute=limits.tokens_per_minute or None,
            dailyCostMicros=limits.daily_cost_micros or None,
            maxConcurrencyPerUser=limits.max_concurrency_per_user or None,
            updatedAt=db_now(),
        )
    )


async def read_keys(conn: AsyncConnection) -> tuple[datetime, list[Any]]:
    """Every key's row, unlocked, with the database's now (for the admin API and stats)."""
    now = (await conn.execute(_NOW)).scalar_one()
    return now, list(await conn.execute(_ALL))

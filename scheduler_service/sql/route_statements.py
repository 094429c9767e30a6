"""Model routes and circuit breakers on SQL: an operator's routes (``AiModelRoute``) and one
breaker row per model key that ever failed as a provider fails (``AiModelBreaker``), read by
every claim on every replica (core/routes.py, core/breakers.py).

A breaker's state moves by one guarded statement each: a failure under the row's lock, the probe
by compare-and-set on the state the claim read (of two replicas whose claims both found the
cool-down over, one sends the probe), a success by one blind UPDATE of the keys that answered."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, delete, literal, null, select, union_all, update
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.core.breakers import (
    Breaker,
    BreakerKey,
    BreakerPolicy,
    BreakerState,
    after_failure,
)
from scheduler_service.core.model_keys import PLATFORM
from scheduler_service.core.routes import ModelTier
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.driver import write_later
from scheduler_service.sql.db.idempotent import insert_ignoring_duplicates
from scheduler_service.sql.db.models import AiModelKey
from scheduler_service.sql.db.route_models import AiModelBreaker, AiModelRoute

__all__ = [
    "Routing",
    "all_breakers",
    "answered",
    "breaker_failed",
    "put_route",
    "read_for_claim",
    "reset_breaker",
    "routes",
    "take_probe",
]

_b = cast(Table, AiModelBreaker.__table__)
_r = cast(Table, AiModelRoute.__table__)
_k = cast(Table, AiModelKey.__table__)
_CLOSED = BreakerState.CLOSED.value

#: What a claim reads, in one statement: the breakers that are not closed and the operators'
#: routes. Both tables are small (a row per failing key, a row per rerouted job type).
_FOR_CLAIM = union_all(
    select(
        literal("b").label("kind"),
        _b.c.provider.label("a"),
        _b.c.model.label("b"),
        _b.c.credentialId.label("c"),
        _b.c.state,
        _b.c.failures,
        _b.c.since,
        _b.c.held,
        null().label("tiers"),
        db_now().label("dbNow"),
    ).where(_b.c.state != _CLOSED),
    select(
        literal("r"),
        _r.c.jobType,
        null(),
        null(),
        null(),
        null(),
        null(),
        null(),
        _r.c.tiers,
        db_now(),
    ),
)
_KEY = (
    _b.c.provider == bindparam("b_provider"),
    _b.c.model == bindparam("b_model"),
    _b.c.credentialId == bindparam("b_credential"),
)
_ONE_LOCKED = select(_b, db_now().label("dbNow")).where(*_KEY).with_for_update()
_PROBE = (
    update(_b)
    .where(*_KEY, _b.c.state == bindparam("b_state"), _b.c.since == bindparam("b_since"))
    .values(state=BreakerState.HALF_OPEN.value, since=bindparam("v_now"), updatedAt=db_now())
)
_SAVE = (
    update(_b)
    .where(*_KEY)
    .values(
        state=bindparam("v_state"),
        failures=bindparam("v_failures"),
        since=bindparam("v_since"),
        held=bindparam("v_held"),
        openedTotal=_b.c.openedTotal + bindparam("v_opened"),
        updatedAt=db_now(),
    )
)
#: Calls on these keys answered: their breakers close and their failures count again from 0
#: (a held breaker waits for its operator). Matches nothing on a healthy key.
_ANSWERED = (
    update(_b)
    .where(
        _b.c.provider == bindparam("b_provider"),
        _b.c.model == bindparam("b_model"),
        _b.c.credentialId.in_(bindparam("b_credentials", expanding=True)),
        _b.c.held.is_(False),
        (_b.c.state != _CLOSED) | (_b.c.failures > 0),
    )
    .values(state=_CLOSED, failures=0, since=None, updatedAt=db_now())
)
#: A platform key whose breaker an answer closes forgets the window its congestion control
#: learned (core/model_keys.py): the failures that opened the breaker and the probes halved it
#: for an outage, not for congestion, and it would grow back by one call per round long after the
#: provider recovered. Without a window it starts over from its limit or the initial
#: concurrency, doubling per round (slow start). Sent before the breaker's UPDATE, which it reads.
_RECOVERED = (
    update(_k)
    .where(
        _k.c.provider == bindparam("b_provider"),
        _k.c.model == bindparam("b_model"),
        _k.c.credentialScope == PLATFORM,
        select(_b.c.provider)
        .where(
            _b.c.provider == _k.c.provider,
            _b.c.model == _k.c.model,
            _b.c.credentialId == "",
            _b.c.held.is_(False),
            _b.c.state != _CLOSED,
        )
        .exists(),
    )
    .values(effectiveConcurrency=None, growthThreshold=None, decreasedAt=None, updatedAt=db_now())
)
_RESET = (
    update(_b)
    .where(*_KEY, (_b.c.state != _CLOSED) | (_b.c.failures > 0))
    .values(state=_CLOSED, failures=0, since=None, held=False, updatedAt=db_now())
)


def key_of(row: Any) -> BreakerKey:
    return BreakerKey(row.provider, row.model, row.credentialId)


def breaker_of(row: Any) -> Breaker:
    return Breaker(BreakerState(row.state), int(row.failures), row.since, bool(row.held))


def _bound(key: BreakerKey) -> dict[str, Any]:
    return {"b_provider": key.provider, "b_model": key.model, "b_credential": key.credential_id}


def tiers_of(text: str) -> tuple[ModelTier, ...]:
    return tuple(ModelTier(str(p), str(m)) for p, m in json.loads(text))


class Routing:
    """What one claim read: the breakers not closed, the operators' routes, the database's
    now."""

    def __init__(
        self,
        now: datetime | None,
        breakers: Mapping[BreakerKey, Breaker],
        operator: Mapping[str, tuple[ModelTier, ...]],
    ) -> None:
        self.now = now
        self.breakers = dict(breakers)
        self.operator = dict(operator)

    @property
    def quiet(self) -> bool:
        """No breaker open and no operator's route: every job leases on the model it has,
        unless the settings reroute."""
        return not self.breakers and not self.operator


async def read_for_claim(conn: AsyncConnection) -> Routing:
    rows = (await conn.execute(_FOR_CLAIM)).all()
    breakers: dict[BreakerKey, Breaker] = {}
    operator: dict[str, tuple[ModelTier, ...]] = {}
    for row in rows:
        if row.kind == "b":
            breakers[BreakerKey(row.a, row.b, row.c)] = Breaker(
                BreakerState(row.state), int(row.failures), row.since, bool(row.held)
            )
        else:
            operator[row.a] = tiers_of(row.tiers)
    return Routing(rows[0].dbNow if rows else None, breakers, operator)


async def take_probe(conn: AsyncConnection, key: BreakerKey, read: Breaker, now: datetime) -> bool:
    """Send the probe of ``key``'s breaker (open or half open as ``read``, its cool-down over):
    True for the one claim whose compare-and-set moved it to half open at ``now``."""
    bound = _bound(key) | {"b_state": read.state.value, "b_since": read.since, "v_now": now}
    return (await conn.execute(_PROBE, bound)).rowcount == 1


async def breaker_failed(
    conn: AsyncConnection, key: BreakerKey, code: str, policy: BreakerPolicy
) -> Breaker:
    """A call on ``key`` failed with ``code`` (a provider's failure): its breaker after it, its
    row made if missing and changed under its lock."""
    row = {
        "provider": key.provider,
        "model": key.model,
        "credentialId": key.credential_id,
        "state": _CLOSED,
    }
    await insert_ignoring_duplicates(conn, _b, [row], stamped=("updatedAt",))
    found = (await conn.execute(_ONE_LOCKED, _bound(key))).one()
    before = breaker_of(found)
    after = after_failure(before, code, found.dbNow, policy)
    if after != before:
        opened = after.state is BreakerState.OPEN and before.state is not BreakerState.OPEN
        await conn.execute(
            _SAVE,
            _bound(key)
            | {
                "v_state": after.state.value,
                "v_failures": after.failures,
                "v_since": after.since,
                "v_held": after.held,
                "v_opened": int(opened),
            },
        )
    return after


async def answered(conn: AsyncConnection, keys: Collection[BreakerKey]) -> None:
    """Calls on ``keys`` answered: their breakers close (and a platform key's window after an
    outage is forgotten), sent with the transaction's next statement (a healthy key's UPDATEs
    match no row)."""
    by_model: dict[tuple[str, str], list[str]] = {}
    for key in sorted(keys):
        by_model.setdefault((key.provider, key.model), []).append(key.credential_id)
    for (provider, model), credentials in sorted(by_model.items()):
        bound = {"b_provider": provider, "b_model": model, "b_credentials": credentials}
        if "" in credentials:
            platform = {"b_provider": provider, "b_model": model}
            await write_later(conn, _RECOVERED, platform, what="windows of recovered keys")
        await write_later(conn, _ANSWERED, bound, what="breakers of answered keys")


async def reset_breaker(conn: AsyncConnection, key: BreakerKey) -> bool:
    """Close ``key``'s breaker (an operator's reset); whether it was open or counting."""
    return (await conn.execute(_RESET, _bound(key))).rowcount == 1


async def all_breakers(
    conn: AsyncConnection,
) -> tuple[datetime, dict[BreakerKey, tuple[Breaker, int]]]:
    """Every breaker row with the times it opened, and the database's now."""
    now = (await conn.execute(select(db_now()))).scalar_one()
    rows = await conn.execute(select(_b))
    return now, {key_of(row): (breaker_of(row), int(row.openedTotal)) for row in rows}


async def routes(conn: AsyncConnection) -> dict[str, tuple[ModelTier, ...]]:
    """The operators' routes."""
    return {row.jobType: tiers_of(row.tiers) for row in await conn.execute(select(_r))}


async def put_route(conn: AsyncConnection, job_type: str, tiers: Sequence[ModelTier]) -> None:
    """Set ``job_type``'s route (no tiers: remove it)."""
    await conn.execute(delete(_r).where(_r.c.jobType == job_type))
    if tiers:
        text = json.dumps([[t.provider, t.model] for t in tiers], separators=(",", ":"))
        await insert_ignoring_duplicates(
            conn, _r, [{"jobType": job_type, "tiers": text}], stamped=("updatedAt",)
        )

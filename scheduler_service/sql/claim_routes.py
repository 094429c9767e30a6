"""A claim's routes: which tier of its job type's model route each candidate leases on, given
the model keys' circuit breakers (core/routes.py, core/breakers.py), and the rows of the jobs
that move to another tier (sql/claims.py calls these inside its transaction)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.core.breakers import BreakerKey, admits
from scheduler_service.core.routes import ModelTier, Router, tier_name
from scheduler_service.sql import job_statements as sql
from scheduler_service.sql import route_statements as route_sql
from scheduler_service.sql.db.driver import write_later

__all__ = ["Routed", "move_tiers", "on_tiers", "routing_of"]


@dataclass(frozen=True, slots=True)
class Routed:
    router: Router
    routing: route_sql.Routing


async def routing_of(conn: AsyncConnection, router: Router | None) -> Routed | None:
    """The claim's routes and breakers, when any job may lease on another tier than the
    model it has; None otherwise (every job leases on its model)."""
    if router is None:
        return None
    routing = await route_sql.read_for_claim(conn)
    if routing.quiet and not router.book.reroutes:
        return None
    return Routed(router.with_operator(routing.operator), routing)


@dataclass(frozen=True, slots=True)
class _OnTier:
    """A candidate row as it leases: on the tier its route chose."""

    id: str
    userId: str
    modelProvider: str
    modelName: str
    credentialMode: str
    tokenEstimate: int


async def on_tiers(
    conn: AsyncConnection, rows: Sequence[Any], routed: Routed
) -> tuple[list[Any], dict[str, tuple[int, ModelTier]]]:
    """The candidates that some tier of their route admits, each on the first such tier, and
    those whose tier is not the one their row names (job id: tier index and tier)."""
    router, routing = routed.router, routed.routing
    verdicts: dict[BreakerKey, bool] = {}
    kept: list[Any] = []
    moves: dict[str, tuple[int, ModelTier]] = {}
    for row in rows:
        current = ModelTier(row.modelProvider, row.modelName)
        tiers = router.tiers(
            row.jobType, current, pinned=bool(row.modelPinned), credential_mode=row.credentialMode
        )
        chosen = None
        for index, tier in enumerate(tiers):
            key = router.breaker_key(
                tier.provider, tier.model, row.credentialMode, row.credentialId
            )
            if await _admitted_on(conn, key, routing, router, verdicts):
                chosen = index, tier
                break
        if chosen is None:
            continue  # no tier can answer now: the job waits
        index, tier = chosen
        if tier != current or tier_name(index) != (row.modelTier or "primary"):
            moves[row.id] = (index, tier)
        kept.append(
            _OnTier(
                row.id,
                row.userId,
                tier.provider,
                tier.model,
                row.credentialMode,
                row.tokenEstimate,
            )
        )
    return kept, moves


async def _admitted_on(
    conn: AsyncConnection,
    key: BreakerKey,
    routing: route_sql.Routing,
    router: Router,
    verdicts: dict[BreakerKey, bool],
) -> bool:
    """Whether ``key``'s breaker admits a call of this claim: a closed one every call, an open
    one whose cool-down is over the one probe this claim's compare-and-set won (the next
    candidates on the key wait for its answer)."""
    breaker = routing.breakers.get(key)
    if breaker is None:
        return True
    if key in verdicts:
        return False
    assert routing.now is not None  # read with the breakers
    admitted, _ = admits(breaker, routing.now, router.breakers)
    verdicts[key] = admitted and await route_sql.take_probe(conn, key, breaker, routing.now)
    return verdicts[key]


async def move_tiers(
    conn: AsyncConnection, ids: Sequence[str], moves: dict[str, tuple[int, ModelTier]]
) -> None:
    """The leased jobs whose tier changed say so on their rows (one statement per tier)."""
    by_tier: dict[tuple[int, ModelTier], list[str]] = {}
    for job_id in ids:
        if job_id in moves:
            by_tier.setdefault(moves[job_id], []).append(job_id)
    for (index, tier), moved in sorted(by_tier.items(), key=lambda item: item[0][0]):
        await write_later(
            conn,
            sql.MOVE_TIER,
            {
                "b_ids": moved,
                "v_modelProvider": tier.provider,
                "v_modelName": tier.model,
                "v_modelTier": tier_name(index),
            },
            expect=len(moved),
            what="jobs moved to another tier",
        )

"""Model routes and circuit breakers in the SQL claim, on SQLite and MariaDB: a job leases on
the first tier of its route whose breaker admits a call, a pinned job and a user's key keep to
their own, an open breaker's cool-down lets one probe through, and on real MariaDB connections
two claims racing for the probe send one."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import cast

import pytest
from sqlalchemy import Table, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.core.breakers import (
    Breaker,
    BreakerKey,
    BreakerPolicy,
    BreakerState,
)
from scheduler_service.core.job_definitions import USER_KEY_MODE
from scheduler_service.core.routes import ModelTier, RouteBook, Router
from scheduler_service.sql import route_statements as route_sql
from scheduler_service.sql.db.models import AiModelKey
from scheduler_service.sql.db.route_models import AiModelBreaker
from shared.error_codes import ErrorCode
from tests.support.db import create_job
from tests.support.store import StoreCalls

TYPES = ["synthetic_echo"]
PRIMARY = ModelTier("deepseek", "model-a")
FALLBACK = ModelTier("deepseek", "model-b")
OTHER_PROVIDER = ModelTier("backup", "model-c")
POLICY = BreakerPolicy(failures_to_open=2, cool_down=timedelta(seconds=30))
ROUTER = Router(
    RouteBook({"synthetic_echo": (PRIMARY, FALLBACK, OTHER_PROVIDER)}, {}),
    lambda _job_type: PRIMARY,
    USER_KEY_MODE,
    "deepseek",
    POLICY,
)
_breakers = cast(Table, AiModelBreaker.__table__)
_keys = cast(Table, AiModelKey.__table__)


async def _fail(engine: AsyncEngine, key: BreakerKey, code: str, times: int = 1) -> Breaker:
    breaker = Breaker()
    for _ in range(times):
        async with engine.begin() as conn:
            breaker = await route_sql.breaker_failed(conn, key, code, POLICY)
    return breaker


async def _open(engine: AsyncEngine, tier: ModelTier, credential: str = "") -> None:
    key = BreakerKey(tier.provider, tier.model, credential)
    breaker = await _fail(engine, key, ErrorCode.TEMPORARY_PROVIDER_ERROR, POLICY.failures_to_open)
    assert breaker.state is BreakerState.OPEN


async def _cool_down_over(engine: AsyncEngine, tier: ModelTier) -> None:
    async with engine.begin() as conn:
        rows = (await route_sql.all_breakers(conn))[1]
        key = BreakerKey(tier.provider, tier.model, "")
        since = rows[key][0].since
        assert since is not None
        await conn.execute(
            update(_breakers)
            .where(_breakers.c.provider == key.provider, _breakers.c.model == key.model)
            .values(since=since - POLICY.cool_down - timedelta(seconds=1))
        )


async def _claim(repo: StoreCalls, want: int, holder: str = "rt-1") -> list[str]:
    (share,) = await repo.claim_batches(TYPES, [(holder, want)], router=ROUTER)
    return [grant.job_id for grant in share]


async def test_with_every_breaker_closed_jobs_lease_on_the_primary(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    job = await create_job(repo, engine, model_name=PRIMARY.model)
    assert await _claim(repo, 1) == [job]
    row = await repo.row(job)
    assert (row["modelName"], row["modelTier"]) == (PRIMARY.model, "primary")


async def test_an_open_primary_sends_jobs_to_the_fallback_and_the_row_says_so(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    jobs = [await create_job(repo, engine, model_name=PRIMARY.model) for _ in range(3)]
    await _open(engine, PRIMARY)
    assert sorted(await _claim(repo, 3)) == sorted(jobs)
    for job in jobs:
        row = await repo.row(job)
        assert (row["modelProvider"], row["modelName"], row["modelTier"]) == (
            "deepseek",
            FALLBACK.model,
            "fallback",
        )


async def test_every_tier_open_leaves_the_job_queued(repo: StoreCalls, engine: AsyncEngine) -> None:
    job = await create_job(repo, engine, model_name=PRIMARY.model)
    for tier in (PRIMARY, FALLBACK, OTHER_PROVIDER):
        await _open(engine, tier)
    assert await _claim(repo, 1) == []
    assert (await repo.row(job))["lifecycleStatus"].value == "queued"


async def test_a_pinned_job_never_changes_model(repo: StoreCalls, engine: AsyncEngine) -> None:
    pinned = await create_job(repo, engine, model_name=PRIMARY.model, model_pinned=True)
    free = await create_job(repo, engine, model_name=PRIMARY.model)
    await _open(engine, PRIMARY)
    assert await _claim(repo, 2) == [free]
    row = await repo.row(pinned)
    assert (row["lifecycleStatus"].value, row["modelName"]) == ("queued", PRIMARY.model)


async def test_a_user_key_job_keeps_to_its_keys_provider_and_its_own_breaker(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    """A 402 on one user's key holds that user's jobs (no other provider's platform key takes
    them); another user's key and the platform's key run."""
    broke = await create_job(
        repo,
        engine,
        user_id="user-broke",
        model_name=PRIMARY.model,
        credential_mode=USER_KEY_MODE,
        credential_id="cred-broke",
    )
    other = await create_job(
        repo,
        engine,
        user_id="user-other",
        model_name=PRIMARY.model,
        credential_mode=USER_KEY_MODE,
        credential_id="cred-other",
    )
    platform = await create_job(repo, engine, user_id="user-3", model_name=PRIMARY.model)
    for tier in (PRIMARY, FALLBACK):
        breaker = await _fail(
            engine,
            BreakerKey(tier.provider, tier.model, "cred-broke"),
            ErrorCode.MODEL_INSUFFICIENT_BALANCE,
        )
        assert breaker.state is BreakerState.OPEN and breaker.held
    assert sorted(await _claim(repo, 3)) == sorted([other, platform])
    assert (await repo.row(broke))["lifecycleStatus"].value == "queued"
    for job in (other, platform):
        assert (await repo.row(job))["modelName"] == PRIMARY.model


async def test_a_user_key_job_falls_back_only_within_its_provider(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    job = await create_job(
        repo,
        engine,
        model_name=PRIMARY.model,
        credential_mode=USER_KEY_MODE,
        credential_id="cred-1",
    )
    for tier in (PRIMARY, FALLBACK):
        await _open(engine, ModelTier(tier.provider, tier.model), credential="cred-1")
    # The other provider's tier admits calls, but only on the platform's key.
    assert await _claim(repo, 1) == []
    assert (await repo.row(job))["modelProvider"] == "deepseek"


async def test_after_the_cool_down_one_probe_goes_to_the_primary_and_its_answer_closes_it(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    jobs = [await create_job(repo, engine, model_name=PRIMARY.model) for _ in range(4)]
    await _open(engine, PRIMARY)
    await _cool_down_over(engine, PRIMARY)
    assert sorted(await _claim(repo, 4)) == sorted(jobs)
    models = sorted([(await repo.row(job))["modelName"] for job in jobs])
    assert models == [PRIMARY.model, FALLBACK.model, FALLBACK.model, FALLBACK.model]
    async with engine.begin() as conn:
        states = (await route_sql.all_breakers(conn))[1]
    assert states[BreakerKey("deepseek", PRIMARY.model)][0].state is BreakerState.HALF_OPEN
    async with engine.begin() as conn:
        await route_sql.answered(conn, [BreakerKey("deepseek", PRIMARY.model)])
    async with engine.begin() as conn:
        states = (await route_sql.all_breakers(conn))[1]
    assert states[BreakerKey("deepseek", PRIMARY.model)][0] == Breaker()
    later = await create_job(repo, engine, model_name=PRIMARY.model)
    assert await _claim(repo, 1) == [later]
    assert (await repo.row(later))["modelName"] == PRIMARY.model


async def _window(engine: AsyncEngine, model: str) -> tuple[float | None, float | None]:
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                select(_keys.c.effectiveConcurrency, _keys.c.growthThreshold).where(
                    _keys.c.model == model
                )
            )
        ).one()
    return row.effectiveConcurrency, row.growthThreshold


async def test_a_recovered_key_forgets_the_window_its_outage_halved(engine: AsyncEngine) -> None:
    """The failures that opened a breaker (and failed probes) halve the key's congestion
    window; the answer that closes it starts the window over. A key whose breaker only counted
    a failure or two keeps what its congestion control learned."""
    async with engine.begin() as conn:
        for tier in (PRIMARY, FALLBACK):
            await conn.execute(
                insert(_keys).values(
                    provider=tier.provider,
                    model=tier.model,
                    credentialScope="platform",
                    effectiveConcurrency=1.0,
                    growthThreshold=1.0,
                    updatedAt=datetime(2026, 1, 1),
                )
            )
    await _open(engine, PRIMARY)
    await _fail(engine, BreakerKey("deepseek", FALLBACK.model), ErrorCode.NETWORK_ERROR)
    async with engine.begin() as conn:
        await route_sql.answered(
            conn, [BreakerKey("deepseek", PRIMARY.model), BreakerKey("deepseek", FALLBACK.model)]
        )
    assert await _window(engine, PRIMARY.model) == (None, None)
    assert await _window(engine, FALLBACK.model) == (1.0, 1.0)


async def test_a_held_breaker_waits_for_the_operators_reset(engine: AsyncEngine) -> None:
    key = BreakerKey("deepseek", PRIMARY.model)
    await _fail(engine, key, ErrorCode.MODEL_INSUFFICIENT_BALANCE)
    async with engine.begin() as conn:
        await route_sql.answered(conn, [key])
        assert (await route_sql.all_breakers(conn))[1][key][0].held
        assert await route_sql.reset_breaker(conn, key)
        breaker, opened = (await route_sql.all_breakers(conn))[1][key]
    assert (breaker, opened) == (Breaker(), 1)


async def test_a_success_between_failures_starts_the_count_again(engine: AsyncEngine) -> None:
    key = BreakerKey("deepseek", PRIMARY.model)
    await _fail(engine, key, ErrorCode.TEMPORARY_PROVIDER_ERROR)
    async with engine.begin() as conn:
        await route_sql.answered(conn, [key])
    breaker = await _fail(engine, key, ErrorCode.NETWORK_ERROR)
    assert (breaker.state, breaker.failures) == (BreakerState.CLOSED, 1)


async def test_an_operators_route_replaces_the_settings(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    job = await create_job(repo, engine, model_name=PRIMARY.model)
    async with engine.begin() as conn:
        await route_sql.put_route(conn, "synthetic_echo", [OTHER_PROVIDER])
    assert await _claim(repo, 1) == [job]
    row = await repo.row(job)
    assert (row["modelProvider"], row["modelName"], row["modelTier"]) == (
        "backup",
        "model-c",
        "primary",
    )


@pytest.mark.mysql
async def test_two_claims_racing_for_the_probe_send_one(
    mysql_repo: StoreCalls, mysql_engine: AsyncEngine
) -> None:
    """Both claims read the breaker open with its cool-down over; their compare-and-set on the
    state they read lets exactly one send the probe, on real MariaDB connections."""
    await _open(mysql_engine, PRIMARY)
    await _cool_down_over(mysql_engine, PRIMARY)
    key = BreakerKey("deepseek", PRIMARY.model)
    async with mysql_engine.connect() as conn:
        routing = await route_sql.read_for_claim(conn)
    read = routing.breakers[key]
    now = routing.now
    assert now is not None

    async def probe() -> bool:
        async with mysql_engine.begin() as conn:
            return await route_sql.take_probe(conn, key, read, now)

    assert sorted(await asyncio.gather(probe(), probe())) == [False, True]

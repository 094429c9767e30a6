"""Model keys in the SQL claim: limits shared by every claim, pauses after a 429,
AIMD concurrency, on SQLite and MariaDB, and two claims racing on real MariaDB connections."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from typing import cast

import pytest
from sqlalchemy import Table, text, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.core.job_definitions import USER_KEY_MODE
from scheduler_service.core.model_keys import FlowPolicy, ModelKey, ModelKeyLimits
from scheduler_service.core.records import JobRecord
from scheduler_service.sql import model_key_statements as flow_sql
from scheduler_service.sql.claims import claim_batches
from scheduler_service.sql.db.models import AiModelKey
from tests.support.db import create_job
from tests.support.store import StoreCalls

TYPES = ["synthetic_echo"]
FLOW = FlowPolicy(ModelKeyLimits(), USER_KEY_MODE)
KEY_A = ModelKey("deepseek", "model-a", "platform")
_keys = cast(Table, AiModelKey.__table__)
_MS = timedelta(milliseconds=1)


async def _jobs(repo: StoreCalls, engine: AsyncEngine, model: str, count: int) -> list[str]:
    return [await create_job(repo, engine, model_name=model) for _ in range(count)]


async def _put(engine: AsyncEngine, key: ModelKey, limits: ModelKeyLimits) -> None:
    async with engine.begin() as conn:
        await flow_sql.put_limits(conn, key, limits)


async def _claim(repo: StoreCalls, want: int, holder: str = "rt-1") -> list[str]:
    (share,) = await repo.claim_batches(TYPES, [(holder, want)], flow=FLOW)
    return [grant.job_id for grant in share]


async def _record(repo: StoreCalls, job_id: str) -> JobRecord:
    job = await repo.get(job_id)
    assert job is not None
    return job


async def test_concurrency_is_shared_by_every_claim(repo: StoreCalls, engine: AsyncEngine) -> None:
    await _jobs(repo, engine, "model-a", 6)
    others = await _jobs(repo, engine, "model-b", 2)
    await _put(engine, KEY_A, ModelKeyLimits(max_concurrency=2))
    first = await _claim(repo, 3, "rt-1")
    second = await _claim(repo, 5, "rt-2")  # another replica's claim, same budget
    leased = first + second
    assert set(others) <= set(leased)
    assert len(leased) == 4  # two of model-a (its limit), both of model-b (no limit)


async def test_a_platform_key_nobody_limited_takes_the_account_concurrency(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    """DeepSeek limits calls at once per account and model, across the account's API keys:
    a platform key no operator limited takes that, a user's own key (another
    account) does not, and an operator's limit replaces it."""
    documented = replace(FLOW, account_concurrency={("deepseek", "model-a"): 2})
    platform = await _jobs(repo, engine, "model-a", 5)
    own = [
        await create_job(repo, engine, model_name="model-a", credential_mode=USER_KEY_MODE)
        for _ in range(2)
    ]

    async def claim(want: int, holder: str) -> list[str]:
        (share,) = await repo.claim_batches(TYPES, [(holder, want)], flow=documented)
        return [grant.job_id for grant in share]

    leased = await claim(3, "rt-1") + await claim(6, "rt-2")  # two replicas' claims
    assert len(set(leased) & set(platform)) == 2 and set(own) <= set(leased)
    await _put(engine, KEY_A, ModelKeyLimits(max_concurrency=3))
    assert len(set(await claim(6, "rt-3")) & set(platform)) == 1


async def test_a_429_pauses_its_key_and_not_the_others(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    a_jobs = await _jobs(repo, engine, "model-a", 3)
    b_jobs = await _jobs(repo, engine, "model-b", 3)
    await repo.model_congested(await _record(repo, a_jobs[0]), FLOW, 3_000)
    assert sorted(await _claim(repo, 6)) == sorted(b_jobs)
    # Three seconds later by the database clock (moved, not waited for), the key is open.
    async with engine.begin() as conn:
        now, (state,) = await flow_sql.read_keys(conn)
        assert state.rateLimitedTotal == 1
        assert state.pausedUntil - now <= timedelta(seconds=3)
        assert state.pausedUntil - now > timedelta(seconds=2)  # set by the same clock just now
        moved = state.pausedUntil - timedelta(seconds=3)
        await conn.execute(update(_keys).values(pausedUntil=moved))
    # Open again, at the concurrency the 429 halved (from the one call in flight then: 1).
    (reopened,) = await _claim(repo, 6)
    assert reopened in a_jobs


async def test_congestion_halves_concurrency_and_successes_win_it_back(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    await _jobs(repo, engine, "model-a", 12)
    await _put(engine, KEY_A, ModelKeyLimits(max_concurrency=8))
    leased = await _claim(repo, 12)
    assert len(leased) == 8
    await repo.model_congested(await _record(repo, leased[0]), FLOW, None)  # a 503: no pause
    async with engine.connect() as conn:
        (row,) = (await flow_sql.read_keys(conn))[1]
    assert row.effectiveConcurrency == 4 and row.pausedUntil is None
    # Calls in flight at the decrease judge nothing; calls leased after it win concurrency back.
    in_flight = [replace(await _record(repo, j), lockedAt=row.decreasedAt - _MS) for j in leased]
    await repo.model_answered([(job, None) for job in in_flight[:3]], FLOW)
    async with engine.connect() as conn:
        (row,) = (await flow_sql.read_keys(conn))[1]
    assert row.effectiveConcurrency == 4
    newer = [replace(job, lockedAt=row.decreasedAt + _MS) for job in in_flight[:3]]
    await repo.model_answered([(job, None) for job in newer], FLOW)
    async with engine.connect() as conn:
        (row,) = (await flow_sql.read_keys(conn))[1]
    assert 4 < row.effectiveConcurrency < 5


@pytest.mark.mysql
async def test_two_racing_claims_never_pass_the_limit(
    mysql_repo: StoreCalls, mysql_engine: AsyncEngine
) -> None:
    await _jobs(mysql_repo, mysql_engine, "model-a", 10)
    await _put(mysql_engine, KEY_A, ModelKeyLimits(max_concurrency=3))
    shares = await asyncio.gather(*(_claim(mysql_repo, 5, f"rt-{n}") for n in range(2)))
    assert sum(len(share) for share in shares) == 3


async def _claim_within_a_second(
    engine: AsyncEngine, flow: FlowPolicy = FLOW, want: int = 1
) -> int:
    """Leases one claim gives, waiting at most a second for any row lock."""
    async with engine.begin() as conn:
        await conn.execute(text("SET SESSION innodb_lock_wait_timeout = 1"))
        (share,) = await claim_batches(
            conn, TYPES, [("rt-1", want)], lease_ttl_ms=60_000, flow=flow
        )
        return len(share)


@pytest.mark.mysql
async def test_a_claim_locks_the_key_rows_only_when_a_key_may_refuse_or_be_written(
    mysql_repo: StoreCalls, mysql_engine: AsyncEngine
) -> None:
    """Every claim and every replica would otherwise wait for each other on the key rows (issue
    19: held to a cluster's commit). Another transaction holds them locked throughout."""

    async def waits_for_the_key_rows() -> bool:
        async with mysql_engine.connect() as holder, holder.begin():
            await flow_sql.lock_states(holder, FLOW)
            try:
                assert await _claim_within_a_second(mysql_engine) == 1
            except OperationalError as exc:
                assert "1205" in str(exc)  # lock wait timeout
                return True
            return False

    await _jobs(mysql_repo, mysql_engine, "model-a", 3)
    await _put(mysql_engine, KEY_A, ModelKeyLimits())  # a row, and nothing that restricts it
    assert not await waits_for_the_key_rows()
    # Per-second counts left from a per-minute limit since removed: the claim clears them.
    async with mysql_engine.begin() as conn:
        await conn.execute(update(_keys).values(requestWindow="[[1,3]]"))
    assert await waits_for_the_key_rows()
    assert await _claim_within_a_second(mysql_engine) == 1  # it cleared them
    assert not await waits_for_the_key_rows()
    await _put(mysql_engine, KEY_A, ModelKeyLimits(max_concurrency=5))
    assert await waits_for_the_key_rows()


@pytest.mark.mysql
async def test_the_account_concurrency_is_kept_without_the_key_lock(
    mysql_repo: StoreCalls, mysql_engine: AsyncEngine
) -> None:
    """Far above what a fleet runs, the account's documented concurrency must not make every
    claim of every replica wait for the others: it is kept by the running count alone."""
    documented = replace(FLOW, account_concurrency={("deepseek", "model-a"): 2})
    await _jobs(mysql_repo, mysql_engine, "model-a", 3)
    await _put(mysql_engine, KEY_A, ModelKeyLimits())  # a row, limited by nobody
    async with mysql_engine.connect() as holder, holder.begin():
        await flow_sql.lock_states(holder, documented)
        assert await _claim_within_a_second(mysql_engine, documented, want=3) == 2

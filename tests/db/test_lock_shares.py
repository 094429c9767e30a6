"""One claim for several runtimes leases each its share in one lock statement (a CASE per holder),
each runtime under a token of its own, on SQLite and MariaDB."""

from __future__ import annotations

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.core.lease_tokens import digest
from scheduler_service.core.records import LeaseGrant
from scheduler_service.sql import claims
from tests.support.db import create_job, raw_row
from tests.support.store import StoreCalls

TYPES = ["synthetic_echo"]
DEMANDS = [("rt-1", 4), ("rt-2", 3), ("rt-3", 3)]


async def _claimed_with_updates(
    repo: StoreCalls, engine: AsyncEngine
) -> tuple[list[list[LeaseGrant]], int]:
    for _ in range(10):
        await create_job(repo, engine)
    sent: list[str] = []

    def record(*args: object) -> None:
        sent.append(str(args[2]))

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        shares = await repo.claim_batches(TYPES, DEMANDS)
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)
    return shares, sum(1 for sql in sent if sql.lstrip().upper().startswith("UPDATE"))


async def _assert_each_share_held_by_its_runtime(
    engine: AsyncEngine, shares: list[list[LeaseGrant]]
) -> None:
    assert [len(share) for share in shares] == [want for _, want in DEMANDS]
    tokens = []
    for (holder, _), share in zip(DEMANDS, shares, strict=True):
        (token,) = {grant.lease_token for grant in share}
        tokens.append(token)
        for grant in share:
            row = await raw_row(engine, grant.job_id)
            assert row["lifecycleStatus"] == "running"
            assert row["lockedBy"] == holder
            assert row["leaseTokenHash"] == digest(token)
    assert len(set(tokens)) == len(DEMANDS)


async def test_the_shares_of_several_runtimes_are_leased_in_one_statement(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    shares, updates = await _claimed_with_updates(repo, engine)
    assert updates == 1
    await _assert_each_share_held_by_its_runtime(engine, shares)


async def test_more_runtimes_than_one_statement_holds_take_one_statement_per_group(
    repo: StoreCalls, engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(claims, "HOLDERS_PER_LOCK", 2)
    shares, updates = await _claimed_with_updates(repo, engine)
    assert updates == 2  # rt-1 and rt-2 together, rt-3 alone
    await _assert_each_share_held_by_its_runtime(engine, shares)

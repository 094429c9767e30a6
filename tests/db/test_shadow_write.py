"""The two-way shadow write (ADR-002 §4): a write by legacy code that sets only
``status`` — System A's producer inserting a row, its worker moving one through ``processing`` to
``completed`` — moves ``lifecycleStatus`` by the reverse map, in the database, whoever the
writer. The engine's own writes keep ``status`` by the forward map and never bounce back: every
lifecycle test runs through the triggers (tests/db/test_races.py checks the two columns agree
after every engine write)."""

from __future__ import annotations

import pytest
from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.core.state_machine import LIFECYCLE_OF_LEGACY, LegacyStatus
from tests.support.db import create_job
from tests.support.db_checks import job_row
from tests.support.store import StoreCalls

# As System A writes them: raw SQL that names no column of the engine's.
_PRODUCE = text(
    "INSERT INTO AiAnalysisJob (id, userId, answerId, jobType, status, progress, createdAt,"
    " updatedAt) VALUES (:id, 'legacy-user', 'answer-1', 'active-recall', :status, 0,"
    " CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
)
_WORK = text("UPDATE AiAnalysisJob SET status = :status, progress = :progress WHERE id = :id")


async def _legacy(engine: AsyncEngine, statement: TextClause, **params: object) -> None:
    async with engine.begin() as conn:
        await conn.execute(statement, params)


async def _statuses(engine: AsyncEngine, job_id: str) -> tuple[str, str]:
    row = await job_row(engine, job_id)
    return row["lifecycleStatus"], row["status"]


async def test_the_legacy_worker_moves_the_lifecycle_with_its_status(
    engine: AsyncEngine,
) -> None:
    await _legacy(engine, _PRODUCE, id="legacy-a", status="pending")
    assert await _statuses(engine, "legacy-a") == ("queued", "pending")

    await _legacy(engine, _WORK, id="legacy-a", status="processing", progress=10)
    assert await _statuses(engine, "legacy-a") == ("running", "processing")

    await _legacy(engine, _WORK, id="legacy-a", status="completed", progress=100)
    assert await _statuses(engine, "legacy-a") == ("succeeded", "completed")


@pytest.mark.parametrize("legacy", list(LegacyStatus), ids=[s.value for s in LegacyStatus])
async def test_every_legacy_status_maps_back_on_insert_and_update(
    engine: AsyncEngine, legacy: LegacyStatus
) -> None:
    expected = LIFECYCLE_OF_LEGACY[legacy].value
    await _legacy(engine, _PRODUCE, id="inserted", status=legacy.value)
    await _legacy(engine, _PRODUCE, id="updated", status="pending")
    await _legacy(engine, _WORK, id="updated", status=legacy.value, progress=0)

    assert (await _statuses(engine, "inserted"))[0] == expected
    assert (await _statuses(engine, "updated"))[0] == expected


async def test_an_unknown_legacy_status_leaves_the_lifecycle_alone(engine: AsyncEngine) -> None:
    await _legacy(engine, _PRODUCE, id="odd", status="pending")
    await _legacy(engine, _WORK, id="odd", status="archived", progress=0)
    assert await _statuses(engine, "odd") == ("queued", "archived")


async def test_legacy_writes_are_stamped_and_the_engines_are_not(
    engine: AsyncEngine, repo: StoreCalls
) -> None:
    """The triggers record when legacy code last wrote a row (migration 0013): the contract
    step's quiet period and the intake of adopted types read it."""
    await _legacy(engine, _PRODUCE, id="legacy-b", status="pending")
    inserted = (await job_row(engine, "legacy-b"))["legacyWrittenAt"]
    assert inserted is not None
    await _legacy(engine, _WORK, id="legacy-b", status="processing", progress=5)
    assert (await job_row(engine, "legacy-b"))["legacyWrittenAt"] >= inserted
    # A legacy write that leaves status as it was (progress only) is not told apart from the
    # engine's: only status changes are stamped.

    engine_job = await create_job(repo, engine)
    await repo.lock(engine_job, "rt-1")
    assert (await job_row(engine, engine_job))["legacyWrittenAt"] is None
    assert await _statuses(engine, engine_job) == ("running", "processing")

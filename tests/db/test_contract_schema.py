"""The contract step on both databases: on SQLite (``make run``'s) as on MariaDB, it
refuses while System A owns a type, then drops the legacy columns and the triggers, and the
engine's writes — told by the unit of work that ``status`` is gone — keep working."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from scheduler_service.sql import job_statements as lifecycle_sql
from scheduler_service.sql import legacy_statements as legacy_sql
from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.legacy_contract import contract
from scheduler_service.sql.migrate import migrate
from tests.conftest import DatabaseFactory
from tests.support.db import create_job, db_now_value
from tests.support.store import StoreCalls


@pytest.fixture(autouse=True)
def _shadow_write_restored() -> object:
    yield
    lifecycle_sql.set_shadow_write(True)  # process-wide: the next test's schema is expanded


async def test_contract_then_the_engine_writes_without_status(database: DatabaseFactory) -> None:
    url = await database()
    await migrate(url)
    code, lines = await contract(url, check=True)
    assert code == 1 and any("still owned by System A" in line for line in lines)

    engine = create_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("DELETE FROM AiLegacyJobType"))
        later = await db_now_value(engine) + timedelta(days=8)
        assert (await contract(url, check=False, as_of=later))[0] == 0
        async with engine.connect() as conn:
            assert not await legacy_sql.has_legacy_status(conn)

        # A store that still writes status meets the dropped column once, then writes without.
        repo = StoreCalls(engine)
        job_id = await create_job(repo, engine)
        assert not lifecycle_sql.shadow_write()
        grant = await repo.lock(job_id, "rt-1")
        assert grant.job_id == job_id
        assert (await repo.get(job_id)).lifecycleStatus.value == "running"  # type: ignore[union-attr]
    finally:
        await engine.dispose()

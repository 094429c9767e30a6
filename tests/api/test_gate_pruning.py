"""Per-user gate rows do not accumulate forever (varying ``x-user-id`` per call left a
row per id): rows not created within a day are pruned, and a pruned user's next create puts its
row back (inside the create's transaction) and still counts against its cap."""

from __future__ import annotations

from typing import cast

import grpc
import pytest
from sqlalchemy import Table, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from devtools.harness.runtime_client import JobClient
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.models import AiUserJobGate
from shared.status_details import error_reason
from tests.support.schedulers import SchedulerFactory

pytestmark = pytest.mark.mysql

GATES = cast(Table, AiUserJobGate.__table__)


async def _gate_users(engine: AsyncEngine) -> set[str]:
    async with engine.connect() as conn:
        return set((await conn.execute(select(GATES.c.userId))).scalars())


async def test_old_gate_rows_are_pruned_and_come_back_on_the_next_create(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, max_active_jobs_per_user=1)
    app = scheduler.app
    for user in ("drive-by-1", "drive-by-2", "regular"):
        await JobClient(scheduler.channel, user).create()
    assert await _gate_users(app.engine) == {"drive-by-1", "drive-by-2", "regular"}
    async with app.engine.begin() as conn:
        await conn.execute(
            update(GATES)
            .where(GATES.c.userId.in_(["drive-by-1", "drive-by-2"]))
            .values(updatedAt=db_now(-2 * 24 * 3_600_000))
        )
    assert await app.reaper.prune_gates() == 2
    assert await _gate_users(app.engine) == {"regular"}
    # The pruned user's active job still counts: its next create is refused at the cap.
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await JobClient(scheduler.channel, "drive-by-1").create()
    assert error_reason(refused.value) == "TOO_MANY_JOBS"

"""``python -m scheduler_service contract``: M-AI-05 and M-AI-08, the one step that drops anything.

It drops the legacy ``status``, ``sessionId`` and ``answerId`` columns, the shadow-write triggers,
and System B's ``AiRuntimeJob`` / ``AiRuntimeResult`` tables where the database has them. Never run
by start-up migration or ``make run``. It refuses while anything still needs the legacy schema: a
job type System A owns, a row legacy code wrote within the quiet period, a row the legacy worker
is running or whose intake is pending, a row in a table it would drop. ``--check`` says what
blocks it and exits 1 while anything does. Replicas notice the dropped column by themselves
(their next reaper sweep) and stop writing ``status``."""

from __future__ import annotations

import logging
from datetime import datetime

from scheduler_service.sql import legacy_statements as legacy_sql
from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.migrate import migrate

__all__ = ["DEFAULT_QUIET_DAYS", "contract"]

log = logging.getLogger(__name__)

DEFAULT_QUIET_DAYS = 7


async def contract(
    database_url: str,
    *,
    check: bool,
    quiet_days: int = DEFAULT_QUIET_DAYS,
    as_of: datetime | None = None,
) -> tuple[int, list[str]]:
    """(exit code, lines to print). ``as_of`` (naive UTC) stands in for the database's clock
    when judging the quiet period: a rehearsal, or a test's clock."""
    await migrate(database_url)
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.begin() as conn:
            if not await legacy_sql.has_legacy_status(conn):
                return 0, ["already contracted: the legacy columns are gone"]
            blockers = await legacy_sql.contract_blockers(conn, quiet_days=quiet_days, as_of=as_of)
            if blockers:
                return 1, ["the contract step is blocked:", *(f"  - {b}" for b in blockers)]
            if check:
                return 0, ["nothing blocks the contract step"]
            dropped = await legacy_sql.drop_legacy_schema(conn)
    finally:
        await engine.dispose()
    log.warning(
        "legacy schema contracted", extra={"action": "legacy_contracted", "dropped": dropped}
    )
    return 0, ["contracted: dropped", *(f"  - {d}" for d in dropped)]

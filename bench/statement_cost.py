"""What one statement costs the scheduler's process on each path to MariaDB, in one run.

The same 40-id ``IN`` select (no row matches: the cost is the call, not the rows), on one pooled
connection, timed in CPU per call:

* **sqlalchemy** — ``AsyncConnection.execute`` on a plain ``create_async_engine``: a greenlet and
  an execution context per call;
* **driver** — the same call on the scheduler's engine (``scheduler_service/sql/db/driver.py``);
* **cursor** — the asyncmy cursor alone, the SQL written out: the floor.

    python -m bench.statement_cost      # AIJOB_BENCH_STATEMENT_CALLS (default 3000)
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from bench.databases import throwaway_database
from bench.sizes import size
from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.db.models import AiJob

CALLS = size("STATEMENT_CALLS", 3000, 50)
IDS = [f"missing-{i}" for i in range(40)]
_j = AiJob.__table__.c
BY_IDS = select(_j.id, _j.attemptCount).where(_j.id.in_(bindparam("b_ids", expanding=True)))
WRITTEN_OUT = (
    "SELECT id, attemptCount FROM AiAnalysisJob WHERE id IN (" + ", ".join(["%s"] * 40) + ")"
)


async def _cpu_per_call(call: Callable[[], Awaitable[object]]) -> float:
    await call()  # the first sighting (compiled, planned) is not what is measured
    started = time.process_time()
    for _ in range(CALLS):
        await call()
    return 1e6 * (time.process_time() - started) / CALLS


async def _through(conn: AsyncConnection) -> float:
    return await _cpu_per_call(lambda: _rows(conn))


async def _rows(conn: AsyncConnection) -> object:
    return (await conn.execute(BY_IDS, {"b_ids": IDS})).all()


async def _on_cursor(raw: Any) -> object:
    async with raw.cursor() as cur:
        await cur.execute(WRITTEN_OUT, IDS)
        return await cur.fetchall()


async def main() -> dict[str, float]:
    async with throwaway_database() as url:
        ours = create_engine(url, pool_size=1)
        plain = create_async_engine(url, pool_size=1)
        try:
            figures: dict[str, list[float]] = {"sqlalchemy": [], "driver": [], "cursor": []}
            # Alternated, twice: the host's speed drifts from one minute to the next.
            for _ in range(2):
                async with plain.connect() as conn:
                    figures["sqlalchemy"].append(await _through(conn))
                async with ours.connect() as conn:
                    figures["driver"].append(await _through(conn))
                    raw = (await conn.get_raw_connection()).driver_connection
                    figures["cursor"].append(
                        await _cpu_per_call(functools.partial(_on_cursor, raw))
                    )
        finally:
            await ours.dispose()
            await plain.dispose()
    best = {path: min(values) for path, values in figures.items()}
    print(f"\nstatement cost, a 40-id IN select, CPU per call ({CALLS} calls, best of 2)\n")
    for path, cost in best.items():
        print(f"{path:12} {cost:8.1f} us  {cost / best['cursor']:5.2f} x the cursor")
    return {f"statement_{path}_us": cost for path, cost in best.items()}


if __name__ == "__main__":
    asyncio.run(main())

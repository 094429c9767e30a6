"""The reads of running jobs, and the claim's read of queued ones, go through their index on
MariaDB (scheduler_service/sql/db/hints.py), even where the optimizer would rather read the whole
table: for the running reads, here every row is running, the case in which it picks a full scan
unless told otherwise."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from sqlalchemy import Select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from scheduler_service.sql import gates as sql_gates
from scheduler_service.sql import job_queries as queries
from scheduler_service.sql import job_statements as sql
from scheduler_service.sql import model_key_statements as flow_sql
from scheduler_service.sql.db.hints import DISPATCH_INDEX, RUNNING_INDEX
from tests.support.db import create_job
from tests.support.store import StoreCalls

pytestmark = pytest.mark.mysql

HOLDER = "rt-hints"


def _sql(conn: AsyncConnection, statement: Select[Any], params: dict[str, Any]) -> str:
    compiled = statement.params(**params).compile(
        dialect=conn.dialect, compile_kwargs={"literal_binds": True}
    )
    return str(compiled)


async def _plan(conn: AsyncConnection, sql: str) -> list[Any]:
    return list((await conn.execute(text(f"EXPLAIN {sql}"))).mappings())


@pytest.fixture
async def all_running(mysql_repo: StoreCalls, mysql_engine: AsyncEngine) -> None:
    for _ in range(12):
        await create_job(mysql_repo, mysql_engine)
    (share,) = await mysql_repo.claim_batches(["synthetic_echo"], [(HOLDER, 12)])
    assert len(share) == 12
    async with mysql_engine.begin() as conn:
        await conn.execute(text("ANALYZE TABLE AiAnalysisJob"))


@pytest.mark.parametrize(
    ("statement", "params"),
    [
        (flow_sql._RUNNING_BY_KEY, {}),
        (queries._CANCEL_REQUESTED_HELD, {"b_holders": [HOLDER]}),
    ],
    ids=["running per model key", "cancel requests of held jobs"],
)
async def test_running_rows_are_read_through_their_index(
    all_running: None,
    mysql_engine: AsyncEngine,
    statement: Select[Any],
    params: dict[str, Any],
) -> None:
    async with mysql_engine.connect() as conn:
        sql = _sql(conn, statement, params)
        (step,) = await _plan(conn, sql)
        # The same read without the hint: the plan this guards against, on these rows.
        (unhinted,) = await _plan(conn, sql.replace(f"FORCE INDEX ({RUNNING_INDEX})", ""))
    assert f"FORCE INDEX ({RUNNING_INDEX})" in sql
    assert step["key"] == RUNNING_INDEX
    assert step["type"] in ("ref", "range")
    assert unhinted["type"] == "ALL"


async def test_the_claim_walks_the_dispatch_index(
    mysql_repo: StoreCalls, mysql_engine: AsyncEngine
) -> None:
    """The claim's candidates are read in the dispatch index's order and stop at the round's
    slots: its plan names that index whatever the table's statistics say, and it reads only the
    rows it takes (a drain's slow log saw the unhinted read examine the whole table while the
    statistics were those of the table before its burst of creates)."""
    for _ in range(24):
        await create_job(mysql_repo, mysql_engine)
    statement = sql.SELECT_CLAIMABLE_DETAIL.params(b_types=["synthetic_echo"], b_defer_ms=0)
    async with mysql_engine.begin() as conn:
        compiled = str(
            statement.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True})
        )
        claim = re.sub(r"LIMIT \S+", "LIMIT 4", compiled)
        analyzed = (await conn.execute(text(f"ANALYZE FORMAT=JSON {claim}"))).scalar_one()
    (jobs, *_) = json.loads(analyzed)["query_block"]["nested_loop"]
    assert f"FORCE INDEX ({DISPATCH_INDEX})" in claim
    assert jobs["table"]["key"] == DISPATCH_INDEX
    assert jobs["table"]["r_rows"] == 4


def _read_rows(plan: Any) -> list[int]:
    """Every table access's ``r_rows`` in an ``ANALYZE FORMAT=JSON`` plan, subqueries included."""
    if isinstance(plan, dict):
        found = [plan["r_rows"]] if "table_name" in plan and "r_rows" in plan else []
        return found + [n for value in plan.values() for n in _read_rows(value)]
    if isinstance(plan, list):
        return [n for value in plan for n in _read_rows(value)]
    return []


async def test_a_create_reads_its_priority_s_places_not_the_queue(
    mysql_repo: StoreCalls, mysql_engine: AsyncEngine
) -> None:
    """A create reads its priority's first queued and last running fair places; with System A's
    rows left out, ``MIN()`` read every queued job to find the first (a cost at each create
    that grew with the backlog). The ordered read stops at the first row it may take."""
    for _ in range(24):
        await create_job(mysql_repo, mysql_engine)
    (share,) = await mysql_repo.claim_batches(["synthetic_echo"], [(HOLDER, 4)])
    assert len(share) == 4
    async with mysql_engine.begin() as conn:
        priorities = await conn.execute(text("SELECT DISTINCT priority FROM AiAnalysisJob"))
        (priority,) = priorities.one()
        floor = str(
            sql_gates._QUEUE_FLOOR.params(b_priority=priority).compile(
                dialect=conn.dialect, compile_kwargs={"literal_binds": True}
            )
        )
        head, last = (await conn.execute(text(floor))).one()
        analyzed = (await conn.execute(text(f"ANALYZE FORMAT=JSON {floor}"))).scalar_one()
    assert head is not None and last is not None
    reads = _read_rows(json.loads(analyzed))
    assert reads, analyzed
    # One queued place and one running place; the two rows of System A's types, read once each.
    assert max(reads) <= 2, reads

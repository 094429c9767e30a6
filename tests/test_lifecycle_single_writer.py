"""Only the SQL job store and the claim write ``lifecycleStatus``; how that is enforced.

The values a write sets are declared in one table (``core/transitions.py``) and compiled into
statements in one module (``sql/job_statements.py``); the SQL job store and the claim run them.

Two checks: a static scan of the project's source (below) and a runtime tripwire on every engine in
the test suite (tests/support/lifecycle_guard.py) that fails any statement writing the column from
elsewhere. Schema migrations are the one other writer: they backfill the column from legacy data.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import cast

import pytest
from sqlalchemy import Table, text, update

from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.db.models import AiJob
from scheduler_service.sql.migrate import migrate
from tests.conftest import DatabaseFactory
from tests.support import lifecycle_guard

ROOT = Path(__file__).resolve().parent.parent
SCHEDULER = ROOT / "scheduler_service"
#: Where the written values are declared (the write table) and turned into SQL.
DECLARING = (SCHEDULER / "core" / "transitions.py", SCHEDULER / "sql" / "job_statements.py")
SOURCE_DIRS = ("scheduler_service", "runtime_service", "shared")
COLUMN = "lifecycleStatus"
RAW_WRITE = re.compile(r"\b(UPDATE|INSERT\s+INTO)\s+[`\"]?AiAnalysisJob\b", re.IGNORECASE)


def _project_modules() -> list[Path]:
    files = [p for d in SOURCE_DIRS for p in (ROOT / d).rglob("*.py")]
    return [p for p in files if "gen" not in p.relative_to(ROOT).parts and p not in DECLARING]


def _writes(tree: ast.AST) -> list[int]:
    """Line numbers where ``tree`` writes the column: a keyword, a dict key, an attribute
    assignment or raw SQL naming it."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == COLUMN:
            lines.append(node.value.lineno)
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                if key is None:  # a ** expansion
                    continue
                named = isinstance(key, ast.Constant) and key.value == COLUMN
                column = isinstance(key, ast.Attribute) and key.attr == COLUMN
                if named or column:
                    lines.append(key.lineno)
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            lines += [
                t.lineno for t in targets if isinstance(t, ast.Attribute) and t.attr == COLUMN
            ]
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and COLUMN in node.value
            and RAW_WRITE.search(node.value)
        ):
            lines.append(node.lineno)
    return lines


def test_no_module_but_the_write_table_writes_lifecycle_status() -> None:
    modules = _project_modules()
    assert len(modules) > 10
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in modules
        if (found := _writes(ast.parse(path.read_text(), str(path))))
    }
    assert offenders == {}


def test_the_scan_finds_each_kind_of_write() -> None:
    samples = [
        "update(t).values(lifecycleStatus='failed')",
        "conn.execute(update(t).values({'lifecycleStatus': 'failed'}))",
        "conn.execute(update(t).values({t.c.lifecycleStatus: 'failed'}))",
        "job.lifecycleStatus = 'failed'",
        "conn.execute(text(\"UPDATE AiAnalysisJob SET lifecycleStatus='failed'\"))",
    ]
    for sample in samples:
        assert _writes(ast.parse(sample)), sample
    for module in DECLARING:
        assert _writes(ast.parse(module.read_text())), f"{module.name} itself must be found"
    assert not _writes(ast.parse("select(t).where(t.c.lifecycleStatus == 'queued')"))


async def test_the_runtime_tripwire_refuses_a_write_from_elsewhere(
    sqlite_database: DatabaseFactory,
) -> None:
    url = await sqlite_database()
    await migrate(url)
    engine = create_engine(url)
    try:
        for statement in (
            update(cast(Table, AiJob.__table__)).values(lifecycleStatus="failed"),
            text("UPDATE AiAnalysisJob SET lifecycleStatus = 'failed'"),
        ):
            with pytest.raises(lifecycle_guard.LifecycleWriteOutsideStore):
                async with engine.begin() as conn:
                    await conn.execute(statement)
        async with engine.begin() as conn:  # reads and other columns pass
            await conn.execute(
                text("UPDATE AiAnalysisJob SET progress = 1 WHERE lifecycleStatus = 'x'")
            )
    finally:
        await engine.dispose()

"""The tests' migrated MariaDB databases (tests/support/schema_copy.py) are the ones alembic
makes: every table described the same, the same seeded rows, the same triggers."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_service.sql.migrate import migrate
from tests.conftest import DatabaseFactory
from tests.support.schema_copy import migrated, tables_of, triggers_of

pytestmark = pytest.mark.mysql


_KEYS = ("KEY ", "UNIQUE KEY ", "FULLTEXT KEY ", "SPATIAL KEY ")


def _normalized(create: str) -> tuple[list[str], list[str]]:
    """A table's columns and constraints in order, its indexes as a set: alembic creates a
    table's indexes in an order that differs from run to run (same indexes, listed apart)."""
    lines = [line.strip().rstrip(",") for line in create.splitlines()]
    keys = sorted(line for line in lines if line.startswith(_KEYS))
    return [line for line in lines if not line.startswith(_KEYS)], keys


Described = dict[str, tuple[tuple[list[str], list[str]], list[tuple[Any, ...]]]]


async def _described(url: str) -> Described:
    return {
        table.name: (_normalized(table.create), sorted(tuple(r.values()) for r in table.rows))
        for table in await tables_of(url)
    }


async def test_a_copied_schema_is_the_migrated_one(mysql_database: DatabaseFactory) -> None:
    by_alembic, copied = await mysql_database(), await mysql_database()
    await migrate(by_alembic)
    await migrated(await mysql_database())  # the session's capture, if no test made it yet
    await migrated(copied)
    expected = await _described(by_alembic)
    assert len(expected) > 10
    found = await _described(copied)
    assert sorted(found) == sorted(expected)
    for name, (create, rows) in expected.items():
        assert found[name][0] == create, name
        assert found[name][1] == rows, name
    triggers = await triggers_of(by_alembic)
    assert len(triggers) == 2
    assert await triggers_of(copied) == triggers


async def test_a_copied_trigger_names_no_definer(mysql_database: DatabaseFactory) -> None:
    """The server records who created a trigger; a capture replayed on another server (a test's
    own MariaDB, started without grant tables) must not name a user that server lacks."""
    url = await mysql_database()
    await migrate(url)
    triggers = await triggers_of(url)
    assert triggers
    for create in triggers.values():
        assert create.startswith("CREATE TRIGGER "), create[:60]

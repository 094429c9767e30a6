"""Fixtures of the database tests: the job store's operations, each in a unit of work of its own."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.store import StoreCalls


@pytest.fixture
def repo(engine: AsyncEngine) -> StoreCalls:
    """On each kind of database (SQLite and MariaDB)."""
    return StoreCalls(engine, lease_ttl_s=60, lease_grace_s=30)


@pytest.fixture
def mysql_repo(mysql_engine: AsyncEngine) -> StoreCalls:
    """On MariaDB only, for races between real connections."""
    return StoreCalls(mysql_engine)

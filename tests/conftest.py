"""Fixtures every test folder uses: databases (SQLite files and throwaway MariaDB databases),
migrated engines, in-process schedulers and the scripted model server. A folder's own fixtures
live in its own conftest; helpers that are not fixtures live in ``tests/support``.

MySQL tests use AIJOB_TEST_MYSQL_URL (default: the local MariaDB's `test` database). Each test
database is created fresh under a random name and dropped afterwards. Where no MySQL answers, MySQL
tests skip with the reason, unless AIJOB_REQUIRE_MYSQL=1 (CI), where they fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from devtools.scripted_model import ScriptedModelServer
from scheduler_service.sql.db.engine import create_engine
from tests.support import lifecycle_guard
from tests.support.fakes import running_model_server
from tests.support.request_pumps import request_pumps
from tests.support.schedulers import RunningScheduler, SchedulerFactory, scheduler_starter
from tests.support.schema_copy import migrated

DEFAULT_MYSQL_URL = "mysql+asyncmy://root@127.0.0.1:3306/test"
MYSQL_URL = os.environ.get("AIJOB_TEST_MYSQL_URL", DEFAULT_MYSQL_URL)
REQUIRE_MYSQL = os.environ.get("AIJOB_REQUIRE_MYSQL") == "1"

DatabaseFactory = Callable[[], Awaitable[str]]

lifecycle_guard.install()

#: An ended stream's request pump finishes within a turn or two of the loop; this is room for a
#: loaded machine, not a timing: a pump left waiting never finishes.
PUMP_END_S = 10


@pytest.fixture(autouse=True)
async def no_request_pump_left() -> AsyncIterator[None]:
    """Every stream call a test opens ends its request side by the test's end. A request pump
    left waiting is destroyed pending by the garbage collector in some later test, an unraisable
    error there (tests/support/request_pumps.py); here it fails the test that left it."""
    before = asyncio.all_tasks()
    yield
    left = request_pumps(asyncio.all_tasks() - before)
    if left:
        _, waiting = await asyncio.wait(left, timeout=PUMP_END_S)
        assert not waiting, f"{len(waiting)} stream call(s) left their request pump waiting"


@pytest.fixture(scope="session")
async def mysql_server_url() -> str:
    """The admin URL of a reachable MySQL, or a skip (a failure when MySQL is required)."""
    engine = create_engine(MYSQL_URL, pool_size=1)
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
    except Exception as exc:
        reason = f"MySQL at {make_url(MYSQL_URL).render_as_string()} unreachable: {exc!r}"
        if REQUIRE_MYSQL:
            pytest.fail(f"{reason} (AIJOB_REQUIRE_MYSQL=1)")
        pytest.skip(reason)
    finally:
        await engine.dispose()
    return MYSQL_URL


@pytest.fixture
async def mysql_database(mysql_server_url: str) -> AsyncIterator[DatabaseFactory]:
    """A factory of empty MySQL databases, dropped at the end of the test."""
    admin = create_engine(mysql_server_url, pool_size=1)
    created: list[str] = []

    async def make() -> str:
        name = f"aijob_t_{uuid.uuid4().hex[:12]}"
        async with admin.begin() as conn:
            await conn.execute(
                text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
            )
        created.append(name)
        return make_url(mysql_server_url).set(database=name).render_as_string(hide_password=False)

    yield make
    async with admin.begin() as conn:
        for name in created:
            # A connection a test leaked would hold metadata locks and stall the DROP forever.
            leftovers = await conn.execute(
                text(
                    "SELECT id FROM information_schema.processlist"
                    " WHERE db = :db AND id <> CONNECTION_ID()"
                ),
                {"db": name},
            )
            for (thread_id,) in leftovers.all():
                with contextlib.suppress(Exception):
                    await conn.execute(text(f"KILL {int(thread_id)}"))
            await conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
    await admin.dispose()


@pytest.fixture
def sqlite_database(tmp_path: Path) -> DatabaseFactory:
    counter = iter(range(1_000))

    async def make() -> str:
        return f"sqlite+aiosqlite:///{tmp_path}/aijob-{next(counter)}.db"

    return make


@pytest.fixture(params=["sqlite", pytest.param("mysql", marks=pytest.mark.mysql)])
def database(request: pytest.FixtureRequest) -> DatabaseFactory:
    """Empty databases of each kind the repository must work on."""
    fixture_name = "sqlite_database" if request.param == "sqlite" else "mysql_database"
    factory: DatabaseFactory = request.getfixturevalue(fixture_name)
    return factory


@pytest.fixture
async def engine(database: DatabaseFactory) -> AsyncIterator[AsyncEngine]:
    """An engine on a freshly migrated database of each kind."""
    url = await database()
    await migrated(url)
    eng = create_engine(url, pool_size=25)
    yield eng
    await eng.dispose()


@pytest.fixture
async def mysql_engine(mysql_database: DatabaseFactory) -> AsyncIterator[AsyncEngine]:
    """An engine on a freshly migrated MySQL database, with room for racing connections."""
    url = await mysql_database()
    await migrated(url)
    eng = create_engine(url, pool_size=25)
    yield eng
    await eng.dispose()


@pytest.fixture
async def mysql_url(mysql_database: DatabaseFactory) -> str:
    """The URL of a freshly migrated MySQL database."""
    url = await mysql_database()
    await migrated(url)
    return url


@pytest.fixture
async def start_scheduler() -> AsyncIterator[SchedulerFactory]:
    """Start in-process schedulers (several may share one database, like replicas)."""
    async with scheduler_starter() as start:
        yield start


@pytest.fixture
async def scheduler(mysql_url: str, start_scheduler: SchedulerFactory) -> RunningScheduler:
    return await start_scheduler(mysql_url)


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    """The scripted OpenAI-compatible model server on a loopback port."""
    with running_model_server() as server:
        yield server

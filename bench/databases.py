"""Throwaway databases for one benchmark case each, dropped afterwards whatever happens."""

from __future__ import annotations

import asyncio
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import psutil
from sqlalchemy import text
from sqlalchemy.engine import make_url

from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.migrate import migrate

MYSQL_URL = os.environ.get("AIJOB_BENCH_MYSQL_URL", "mysql+asyncmy://root@127.0.0.1:3306/test")


@asynccontextmanager
async def throwaway_database(server_url: str = MYSQL_URL) -> AsyncIterator[str]:
    """A fresh MariaDB/MySQL database at head on the server of ``server_url`` (by default
    AIJOB_BENCH_MYSQL_URL's). The process's first on a server is migrated; the others are
    built from its tables', triggers' and rows' copy (a second of migrations each, else)."""
    admin = create_engine(server_url, pool_size=1)
    name = f"aijob_bench_{uuid.uuid4().hex[:8]}"
    async with admin.begin() as conn:
        await conn.execute(
            text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        )
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    try:
        if server_url in _SCHEMAS:
            await _replay(url, _SCHEMAS[server_url])
        else:
            await migrate(url)
            _SCHEMAS[server_url] = await _captured(url)
        yield url
    finally:
        async with admin.begin() as conn:
            await conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
        await admin.dispose()


@dataclass(frozen=True)
class _Schema:
    """A database at head as the migrations left it: its tables' and triggers' DDL, and the
    rows the migrations wrote (the schema's version, seeded rows)."""

    tables: list[str]
    triggers: list[str]
    rows: dict[str, list[dict[str, Any]]]


_DEFINER = re.compile(r"DEFINER=\S+ ")

#: Per server, the schema the process's first throwaway database was migrated to: the others
#: are built from it, a fraction of a second instead of a second of migrations each.
_SCHEMAS: dict[str, _Schema] = {}


async def _captured(url: str) -> _Schema:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:

            async def shown(statement: str) -> list[Any]:
                return list((await conn.exec_driver_sql(statement)).all())

            names = await shown("SHOW FULL TABLES")
            tables = [name for name, kind in names if kind == "BASE TABLE"]
            if len(tables) != len(names):
                raise NotImplementedError("a view in the schema: migrate each database instead")
            ddl = [(await shown(f"SHOW CREATE TABLE `{t}`"))[0][1] for t in tables]
            found = [row[0] for row in await shown("SHOW TRIGGERS")]
            # Its third column is the statement that created it; without its DEFINER (a user
            # of the first connection's host), it is defined by whoever replays it.
            triggers = [
                _DEFINER.sub("", (await shown(f"SHOW CREATE TRIGGER `{t}`"))[0][2], count=1)
                for t in found
            ]
            rows = {
                t: [dict(r._mapping) for r in await conn.exec_driver_sql(f"SELECT * FROM `{t}`")]
                for t in tables
            }
    finally:
        await engine.dispose()
    return _Schema(ddl, triggers, {t: r for t, r in rows.items() if r})


async def _replay(url: str, schema: _Schema) -> None:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.exec_driver_sql("SET foreign_key_checks = 0")
            for statement in [*schema.tables, *schema.triggers]:
                await conn.exec_driver_sql(statement)
            for table, rows in schema.rows.items():
                columns = list(rows[0])
                await conn.execute(
                    text(
                        f"INSERT INTO `{table}` ({', '.join(f'`{c}`' for c in columns)}) "
                        f"VALUES ({', '.join(f':c{i}' for i in range(len(columns)))})"
                    ),
                    [{f"c{i}": row[c] for i, c in enumerate(columns)} for row in rows],
                )
            await conn.exec_driver_sql("SET foreign_key_checks = 1")
    finally:
        await engine.dispose()


async def jobs_per_second(
    pool: Any, connections: int, jobs: int, one_job: Callable[[Any], Awaitable[None]]
) -> float:
    """Run ``one_job`` ``jobs`` times spread over ``connections`` connections of ``pool`` (an
    asyncmy or asyncpg pool) at once; the rate achieved."""

    async def worker(count: int) -> None:
        async with pool.acquire() as conn:
            for _ in range(count):
                await one_job(conn)

    started = time.perf_counter()
    share = [jobs // connections + (1 if i < jobs % connections else 0) for i in range(connections)]
    await asyncio.gather(*(worker(n) for n in share))
    return jobs / (time.perf_counter() - started)


class CpuMeter:
    """CPU seconds spent by this process and the local database servers between ``start`` and
    ``stop`` (psutil), to turn a rate into CPU per job."""

    SERVERS = ("mariadbd", "mysqld", "postgres")

    def __init__(self) -> None:
        self._processes = [psutil.Process()] + [
            p for p in psutil.process_iter(["name"]) if p.info["name"] in self.SERVERS
        ]
        self._before = self._total()

    def _total(self) -> float:
        return _cpu_of(self._processes)

    def seconds(self) -> float:
        return self._total() - self._before


def _cpu_of(processes: list[psutil.Process]) -> float:
    """User and system CPU seconds of ``processes`` so far (one that has ended counts 0)."""
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def _cpu_seconds(process: psutil.Process, *, with_children: bool) -> float:
    try:
        children = process.children(recursive=True) if with_children else []
    except psutil.Error:
        children = []
    return _cpu_of([process, *children])


@dataclass(frozen=True)
class CpuSplit:
    """CPU seconds of each side of a drain: the scheduler processes (their workers included),
    the local MariaDB server (None when it runs elsewhere) and this process (the runtimes)."""

    scheduler: float
    database: float | None
    runtimes: float


class SplitMeter:
    """:class:`CpuSplit` between its creation and :meth:`split`."""

    def __init__(self, schedulers: list[psutil.Process]) -> None:
        self._schedulers = schedulers
        self._database = next(
            (p for p in psutil.process_iter(["name"]) if p.info["name"] in ("mariadbd", "mysqld")),
            None,
        )
        self._runtimes = psutil.Process()
        self._before = self._now()

    def _now(self) -> CpuSplit:
        return CpuSplit(
            sum(_cpu_seconds(p, with_children=True) for p in self._schedulers),
            None if self._database is None else _cpu_seconds(self._database, with_children=False),
            # Own times only: the schedulers are this process's children.
            _cpu_seconds(self._runtimes, with_children=False),
        )

    def split(self) -> CpuSplit:
        now, before = self._now(), self._before
        database = (
            None
            if now.database is None or before.database is None
            else now.database - before.database
        )
        return CpuSplit(now.scheduler - before.scheduler, database, now.runtimes - before.runtimes)

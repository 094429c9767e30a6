"""Throwaway databases for one benchmark case each, dropped afterwards whatever happens."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import psutil
from sqlalchemy import text
from sqlalchemy.engine import make_url

from scheduler_service.db.engine import create_engine
from scheduler_service.migrate import migrate

MYSQL_URL = os.environ.get("AIJOB_BENCH_MYSQL_URL", "mysql+asyncmy://root@127.0.0.1:3306/test")


@asynccontextmanager
async def throwaway_database(server_url: str = MYSQL_URL) -> AsyncIterator[str]:
    """A fresh MariaDB/MySQL database at head on the server of ``server_url`` (by default
    AIJOB_BENCH_MYSQL_URL's)."""
    admin = create_engine(server_url, pool_size=1)
    name = f"aijob_bench_{uuid.uuid4().hex[:8]}"
    async with admin.begin() as conn:
        await conn.execute(
            text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        )
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    try:
        await migrate(url)
        yield url
    finally:
        async with admin.begin() as conn:
            await conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
        await admin.dispose()


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
        total = 0.0
        for process in self._processes:
            try:
                times = process.cpu_times()
            except psutil.Error:
                continue
            total += times.user + times.system
        return total

    def seconds(self) -> float:
        return self._total() - self._before

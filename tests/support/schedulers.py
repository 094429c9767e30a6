"""Schedulers served in process on loopback, for tests: a fixture factory and its types."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc

from devtools.harness import tokens
from scheduler_service.api.server import build_server
from scheduler_service.core.job_definitions import Backoff
from scheduler_service.core.job_registry import BUILTIN_DEFINITIONS, JobRegistry
from scheduler_service.wiring.app import SchedulerApp
from scheduler_service.wiring.settings import SchedulerSettings


def fast_registry() -> JobRegistry:
    """The built-in definitions with short retry backoff, so retry paths run in milliseconds."""
    return JobRegistry(
        dataclasses.replace(
            d, execution=dataclasses.replace(d.execution, backoff=Backoff(base_ms=50, cap_ms=200))
        )
        for d in BUILTIN_DEFINITIONS
    )


@dataclass
class RunningScheduler:
    app: SchedulerApp
    address: str
    channel: grpc.aio.Channel
    database_url: str


SchedulerFactory = Callable[..., Awaitable[RunningScheduler]]


@contextlib.asynccontextmanager
async def scheduler_starter() -> AsyncIterator[SchedulerFactory]:
    """Start schedulers (several may share one database, like replicas); all stop at the end."""
    running: list[tuple[grpc.aio.Server, SchedulerApp, grpc.aio.Channel]] = []

    async def start(
        database_url: str, registry: JobRegistry | None = None, **overrides: Any
    ) -> RunningScheduler:
        values: dict[str, Any] = {
            "database_url": database_url,
            "listen": "127.0.0.1:0",
            "lease_ttl_s": 60,
            "lease_grace_s": 30,
            "reaper_interval_s": 0.2,
            "dispatch_poll_ms": 100,
            "max_output_bytes": 64 * 1024,
            # Tests hold many leases open without an answer; the slow start of an unlimited
            # model key is tested where it is the subject (tests/protocol/test_model_flow.py).
            "model_initial_concurrency": 0,
            **tokens.SETTINGS,
        }
        values.update(overrides)
        settings = SchedulerSettings(**values)
        app = SchedulerApp.create(settings, registry=registry or fast_registry())
        server, _health, port = build_server(settings, app)
        await app.start()
        await server.start()
        channel = tokens.channel(f"127.0.0.1:{port}")
        running.append((server, app, channel))
        return RunningScheduler(app, f"127.0.0.1:{port}", channel, database_url)

    try:
        yield start
    finally:
        for server, app, channel in running:
            await channel.close(None)
            await server.stop(None)
            await app.stop()

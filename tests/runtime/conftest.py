"""Runtimes served in process against a scheduler of the test, with the scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from devtools.harness import tokens
from devtools.scripted_model import ScriptedModelServer
from runtime_service.settings import RuntimeSettings
from runtime_service.worker import Runtime
from tests.support.schedulers import RunningScheduler

RuntimeFactory = Callable[..., Runtime]


@pytest.fixture
async def runtimes(
    scheduler: RunningScheduler, model_server: ScriptedModelServer
) -> AsyncIterator[RuntimeFactory]:
    started: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    def start(name: str, **overrides: Any) -> Runtime:
        values: dict[str, Any] = {
            "scheduler_addr": scheduler.address,
            "runtime_token": tokens.RUNTIME_TOKEN,
            "runtime_instance_id": name,
            "runtime_slots": 4,
            "model_base_url": model_server.base_url,
            "heartbeat_s": 1,
            "drain_grace_s": 5,
        }
        values.update(overrides)
        runtime = Runtime(RuntimeSettings(**values))
        stop = asyncio.Event()
        started.append((stop, asyncio.ensure_future(runtime.run(stop))))
        return runtime

    yield start
    for stop, _task in started:
        stop.set()
    await asyncio.gather(*(task for _, task in started), return_exceptions=True)

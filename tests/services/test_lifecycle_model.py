"""The lifecycle state machine (tests/support/lifecycle_model.py) on the in-memory store: the
write table interpreted in Python agrees with the model, as the SQL store does on MariaDB."""

from __future__ import annotations

import asyncio

from hypothesis.stateful import run_state_machine_as_test

from tests.support.fake_uow import FakeUnitOfWork
from tests.support.lifecycle_model import lifecycle_machine, model_settings
from tests.support.store import UnitCalls


async def test_the_in_memory_store_follows_the_model() -> None:
    machine = lifecycle_machine(UnitCalls(FakeUnitOfWork()), asyncio.get_running_loop())
    config = model_settings(60)
    await asyncio.to_thread(run_state_machine_as_test, machine, settings=config)

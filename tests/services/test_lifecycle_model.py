"""The lifecycle state machine (tests/support/lifecycle_model.py) on the in-memory store: the
write table interpreted in Python agrees with the model, as the SQL store does on MariaDB."""

from __future__ import annotations

import asyncio
import os

from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.support.fake_uow import FakeUnitOfWork
from tests.support.lifecycle_model import lifecycle_machine
from tests.support.store import UnitCalls


async def test_the_in_memory_store_follows_the_model() -> None:
    machine = lifecycle_machine(UnitCalls(FakeUnitOfWork()), asyncio.get_running_loop())
    config = settings(
        max_examples=int(os.environ.get("AIJOB_MODEL_EXAMPLES", "60")),
        stateful_step_count=25,
        deadline=None,
        derandomize=not os.environ.get("AIJOB_FUZZ_RANDOM"),
        suppress_health_check=[HealthCheck.too_slow],
    )
    await asyncio.to_thread(run_state_machine_as_test, machine, settings=config)

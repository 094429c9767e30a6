"""The lifecycle state machine (tests/support/lifecycle_model.py) on MariaDB."""

from __future__ import annotations

import asyncio
import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.lifecycle_model import lifecycle_machine
from tests.support.store import StoreCalls

pytestmark = pytest.mark.mysql


async def test_the_sql_store_follows_the_model(mysql_engine: AsyncEngine) -> None:
    machine = lifecycle_machine(StoreCalls(mysql_engine), asyncio.get_running_loop())
    config = settings(
        max_examples=int(os.environ.get("AIJOB_MODEL_EXAMPLES", "30")),
        stateful_step_count=25,
        deadline=None,
        derandomize=not os.environ.get("AIJOB_FUZZ_RANDOM"),
        suppress_health_check=[HealthCheck.too_slow],
    )
    await asyncio.to_thread(run_state_machine_as_test, machine, settings=config)

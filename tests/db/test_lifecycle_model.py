"""The lifecycle state machine (tests/support/lifecycle_model.py) on MariaDB."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis.stateful import run_state_machine_as_test
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.lifecycle_model import lifecycle_machine, model_settings
from tests.support.store import StoreCalls

pytestmark = pytest.mark.mysql


async def test_the_sql_store_follows_the_model(mysql_engine: AsyncEngine) -> None:
    machine = lifecycle_machine(StoreCalls(mysql_engine), asyncio.get_running_loop())
    config = model_settings(30)
    await asyncio.to_thread(run_state_machine_as_test, machine, settings=config)

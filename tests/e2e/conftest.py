"""End-to-end tests: real scheduler and runtime processes. All of them are ``slow`` (not in
``make test-fast``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.scripted_model import ScriptedModelServer
from tests.support.replicas import Replica
from tests.support.runtime_procs import Launcher, runtime_launcher
from tests.support.schedulers import RunningScheduler, SchedulerFactory

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def launch(tmp_path: Path, model_server: ScriptedModelServer) -> Iterator[Launcher]:
    """Start runtime processes (killed at the end if still up)."""
    with runtime_launcher(tmp_path, model_server) as start:
        yield start


@pytest.fixture
async def short_leases(mysql_url: str, start_scheduler: SchedulerFactory) -> RunningScheduler:
    """A scheduler whose leases end 2.5 s after the last heartbeat, reaped every 0.2 s."""
    return await start_scheduler(mysql_url, lease_ttl_s=2, lease_grace_s=0.5, reaper_interval_s=0.2)


@pytest.fixture
def replicas(mysql_url: str, tmp_path: Path) -> Iterator[list[Replica]]:
    """Two scheduler processes on one database; each stopped gracefully at the end if up."""
    pair = [Replica(mysql_url, tmp_path, f"scheduler-{i}") for i in range(2)]
    for replica in pair:
        replica.start()
    yield pair
    for replica in pair:
        if replica.process is not None and replica.process.poll() is None:
            replica.stop()

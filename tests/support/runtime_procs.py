"""Runtime processes for end-to-end tests: a launcher fixture and waits on a job's state."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

from devtools.harness.procs import runtime_processes
from devtools.harness.waiting import eventually
from devtools.scripted_model import ScriptedModelServer
from tests.support.db_checks import job_row
from tests.support.schedulers import RunningScheduler

Launcher = Callable[..., subprocess.Popen[bytes]]


@contextlib.contextmanager
def runtime_launcher(tmp_path: Path, model_server: ScriptedModelServer) -> Iterator[Launcher]:
    """Start runtime processes against a scheduler (logs in ``tmp_path``); each is killed at the
    end if still up."""
    with runtime_processes(model_server.base_url, tmp_path) as launch:

        def start(
            scheduler: RunningScheduler | str, name: str, **env: str
        ) -> subprocess.Popen[bytes]:
            address = scheduler if isinstance(scheduler, str) else scheduler.address
            return launch(address, name, **env)

        yield start


async def in_flight(scheduler: RunningScheduler, job_id: str, server: ScriptedModelServer) -> None:
    async def check() -> bool:
        row = await job_row(scheduler.app.engine, job_id)
        return row["lifecycleStatus"] == "running" and server.state.counts["requests"] > 0

    await eventually(check)


async def status_is(scheduler: RunningScheduler, job_id: str, status: str) -> None:
    async def check() -> bool:
        return bool((await job_row(scheduler.app.engine, job_id))["lifecycleStatus"] == status)

    await eventually(check)

"""Runtime processes for end-to-end tests: a launcher fixture and waits on a job's state."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from devtools.harness import tokens
from devtools.harness.waiting import eventually
from devtools.scripted_model import ScriptedModelServer
from tests.support.db_checks import job_row
from tests.support.schedulers import RunningScheduler

Launcher = Callable[..., subprocess.Popen[bytes]]


@contextlib.contextmanager
def runtime_launcher(tmp_path: Path, model_server: ScriptedModelServer) -> Iterator[Launcher]:
    """Start runtime processes against a scheduler; each is killed at the end if still up."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(scheduler: RunningScheduler | str, name: str, **env: str) -> subprocess.Popen[bytes]:
        address = scheduler if isinstance(scheduler, str) else scheduler.address
        proc = subprocess.Popen(
            [sys.executable, "-m", "runtime_service"],
            env={
                **os.environ,
                "AIJOB_SCHEDULER_ADDR": address,
                "AIJOB_RUNTIME_TOKEN": tokens.RUNTIME_TOKEN,
                "AIJOB_RUNTIME_INSTANCE_ID": name,
                "AIJOB_RUNTIME_SLOTS": "2",
                "AIJOB_MODEL_BASE_URL": model_server.base_url,
                "AIJOB_HEARTBEAT_S": "0.5",
                **env,
            },
            stderr=(tmp_path / f"{name}.log").open("wb"),
        )
        procs.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


async def in_flight(scheduler: RunningScheduler, job_id: str, server: ScriptedModelServer) -> None:
    async def check() -> bool:
        row = await job_row(scheduler.app.engine, job_id)
        return row["lifecycleStatus"] == "running" and server.state.counts["requests"] > 0

    await eventually(check)


async def status_is(scheduler: RunningScheduler, job_id: str, status: str) -> None:
    async def check() -> bool:
        return bool((await job_row(scheduler.app.engine, job_id))["lifecycleStatus"] == status)

    await eventually(check)

"""Helpers for tests and benchmarks that run the scheduler as child processes."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devtools.harness import tokens


def free_port() -> int:
    """A loopback port that was free a moment ago (the child binds it right after)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_ports_in_a_row(count: int) -> int:
    """The first of ``count`` consecutive loopback ports that were all free a moment ago (for a
    process that binds a base port plus offsets, as ``AIJOB_WORKERS`` metrics do)."""
    while True:
        base = free_port()
        try:
            with contextlib.ExitStack() as held:
                for offset in range(1, count):
                    sock = held.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", base + offset))
        except OSError:
            continue
        return base


def wait_until_serving(address: str, timeout_s: float = 30) -> None:
    """Block until the server at ``address`` answers its health check (no fixed sleeps)."""
    # The channel's default reconnect backoff waits a second after the first refused connect
    # (the child has not bound yet): retry every few tens of milliseconds instead.
    options = [
        ("grpc.initial_reconnect_backoff_ms", 50),
        ("grpc.min_reconnect_backoff_ms", 50),
        ("grpc.max_reconnect_backoff_ms", 200),
    ]
    with grpc.insecure_channel(address, options=options) as channel:
        health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=timeout_s, wait_for_ready=True
        )


@dataclass(frozen=True)
class SchedulerProcess:
    address: str
    process: subprocess.Popen[bytes]


def launch_scheduler(
    database_url: str, address: str, log: Path | None = None, **env: str
) -> subprocess.Popen[bytes]:
    """One ``python -m scheduler_service`` on ``address`` with the test tokens (not waited for);
    with an ``AIJOB_TEST_FAULT_*`` variable in ``env``, through :mod:`devtools.faults`."""
    child_env = {
        **os.environ,
        **tokens.ENV,
        "AIJOB_DATABASE_URL": database_url,
        "AIJOB_LISTEN": address,
        "AIJOB_METRICS_LISTEN": "",
        **env,
    }
    stderr: IO[bytes] | int = log.open("wb") if log else subprocess.DEVNULL
    faulty = any(name.startswith("AIJOB_TEST_FAULT_") for name in env)
    command = [sys.executable, "-m", "devtools.faults" if faulty else "scheduler_service"]
    return subprocess.Popen(command, env=child_env, stderr=stderr)


@contextmanager
def spawn_schedulers(
    database_url: str,
    count: int,
    log_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[list[SchedulerProcess]]:
    """``count`` ``python -m scheduler_service`` processes on one database, with the test
    tokens and ``env`` on top; yields them once serving, then stops them with SIGTERM and checks
    they exit 0."""
    addresses = [f"127.0.0.1:{free_port()}" for _ in range(count)]
    procs = [
        launch_scheduler(
            database_url,
            address,
            (log_dir / f"scheduler-{index}.log") if log_dir else None,
            **(env or {}),
        )
        for index, address in enumerate(addresses)
    ]
    try:
        for address in addresses:
            wait_until_serving(address)
        yield [SchedulerProcess(a, p) for a, p in zip(addresses, procs, strict=True)]
    finally:
        for proc in procs:
            proc.terminate()
        codes = [proc.wait(timeout=30) for proc in procs]
        assert codes == [0] * count, f"scheduler exit codes {codes}"


@contextmanager
def scheduler_processes(
    database_url: str,
    count: int,
    log_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[list[str]]:
    """Addresses of ``count`` scheduler processes (see ``spawn_schedulers``)."""
    with spawn_schedulers(database_url, count, log_dir, env=env) as schedulers:
        yield [s.address for s in schedulers]


#: Starts a runtime process: (scheduler address, instance id, extra AIJOB_* settings).
RuntimeLauncher = Callable[..., subprocess.Popen[bytes]]


@contextmanager
def runtime_processes(
    model_base_url: str, log_dir: Path | None = None, **defaults: str
) -> Iterator[RuntimeLauncher]:
    """Start ``python -m runtime_service`` processes against a scheduler and a model, with the
    test runtime token and ``defaults`` (then each start's own settings) on top; each is killed
    at the end if still up."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(address: str, name: str, **env: str) -> subprocess.Popen[bytes]:
        child_env = {
            **os.environ,
            "AIJOB_SCHEDULER_ADDR": address,
            "AIJOB_RUNTIME_TOKEN": tokens.RUNTIME_TOKEN,
            "AIJOB_RUNTIME_INSTANCE_ID": name,
            "AIJOB_RUNTIME_SLOTS": "2",
            "AIJOB_MODEL_BASE_URL": model_base_url,
            "AIJOB_HEARTBEAT_S": "0.5",
            **defaults,
            **env,
        }
        stderr: IO[bytes] | int = (
            (log_dir / f"{name}.log").open("wb") if log_dir else subprocess.DEVNULL
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "runtime_service"], env=child_env, stderr=stderr
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

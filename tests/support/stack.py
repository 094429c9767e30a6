"""`make run`'s launcher (devtools/devstack.py) as the end-to-end tests start it: scheduler,
runtimes, scripted model and console on free ports, in a directory of the test's own."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc

from devtools.harness.procs import free_port, free_ports_in_a_row, wait_until_serving

ROOT = Path(__file__).resolve().parent.parent.parent

__all__ = ["ROOT", "Stack", "running_stack"]


@dataclass
class Stack:
    env: dict[str, str]
    cwd: Path
    banner: str
    runtime_ports: list[int]

    @property
    def console(self) -> str:
        return f"http://{self.env['AIJOB_CONSOLE_LISTEN']}"


@contextlib.contextmanager
def running_stack(workdir: Path, **extra_env: str) -> Iterator[Stack]:
    runtime_base = free_ports_in_a_row(3)  # the runtimes bind the next two
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "AIJOB_LISTEN": f"127.0.0.1:{free_port()}",
        "AIJOB_METRICS_LISTEN": f"127.0.0.1:{free_port()}",
        "AIJOB_RUNTIME_METRICS_BASE_PORT": str(runtime_base),
        "AIJOB_CONSOLE_LISTEN": f"127.0.0.1:{free_port()}",
        **extra_env,
    }
    env.pop("DEEPSEEK_API_KEY", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "devtools.devstack", "run"],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        try:
            wait_until_serving(env["AIJOB_LISTEN"])
        except grpc.RpcError:
            proc.kill()
            raise AssertionError(_what_the_stack_said(proc, workdir)) from None
        assert proc.stdout is not None
        banner = ""
        while "Ctrl-C stops everything" not in banner:  # the launcher is up once it says so
            line = proc.stdout.readline().decode()
            assert line, _what_the_stack_said(proc, workdir)
            banner += line
        yield Stack(env, workdir, banner, [runtime_base + 1, runtime_base + 2])
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0


def _what_the_stack_said(proc: subprocess.Popen[bytes], workdir: Path) -> str:
    """The launcher's output and the end of each child's log, for a stack that never served."""
    said = [f"the stack did not serve; the launcher exited {proc.wait(timeout=60)}"]
    if proc.stdout is not None:
        said.append(proc.stdout.read().decode(errors="replace")[-4000:])
    for log in sorted((workdir / ".aijob" / "logs").glob("*.log")):
        said.append(f"== {log.name}\n" + log.read_text(errors="replace")[-2000:])
    return "\n".join(said)

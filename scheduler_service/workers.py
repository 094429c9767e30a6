"""Several scheduler processes on one address (``AIJOB_WORKERS``), and only on purpose.

gRPC sets SO_REUSEPORT by default, so a second scheduler started on a busy address would bind it
silently and take half its calls (two ``make run``s would split creates between two databases).
The server binds with port reuse off, and a busy address is a clear error. With
``AIJOB_WORKERS=N`` this parent process checks the address is free, then starts N worker
processes that bind it together with port reuse on; the kernel spreads connections over them.
Each worker is a whole replica (its own dispatcher, hand-off, loops and pool), which the design
already allows on one database; worker ``i`` serves its metrics on the metrics port plus ``i``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from types import FrameType

from scheduler_service.api.tokens import load_tokens
from scheduler_service.core.errors import ConfigurationError
from scheduler_service.wiring.settings import SchedulerSettings

__all__ = ["address_in_use", "run_workers", "worker_env"]


def address_in_use(listen: str) -> bool:
    """Whether another process holds ``listen`` (a bind without port reuse fails)."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, int(port)))
        except OSError:
            return True
    return False


def worker_env(settings: SchedulerSettings, index: int) -> dict[str, str]:
    """The environment of worker ``index``: one process, port reuse on, its own metrics port."""
    env = {**os.environ, "AIJOB_WORKERS": "1", "AIJOB_REUSE_PORT": "true"}
    if settings.metrics_listen:
        host, _, port = settings.metrics_listen.rpartition(":")
        env["AIJOB_METRICS_LISTEN"] = f"{host}:{int(port) + index}"
    return env


def run_workers(settings: SchedulerSettings) -> int:
    """Start ``settings.workers`` serving processes and wait for them; SIGTERM/SIGINT stop them
    all, and one of them failing stops the rest (exit 1)."""
    if settings.listen.rpartition(":")[2] == "0":
        raise ConfigurationError("AIJOB_WORKERS needs a fixed port in AIJOB_LISTEN, not port 0")
    if address_in_use(settings.listen):
        raise ConfigurationError(f"cannot listen on {settings.listen}: the address is in use")
    load_tokens(settings)  # development tokens are written once, before the workers read them
    command = [sys.executable, "-m", "scheduler_service", "serve"]
    workers = [
        subprocess.Popen(command, env=worker_env(settings, index))
        for index in range(settings.workers)
    ]
    stopping = False

    def stop(_signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    failed = False
    while any(w.poll() is None for w in workers):
        if not stopping and any(w.poll() not in (None, 0) for w in workers):
            failed = True
            stop(signal.SIGTERM, None)
        time.sleep(0.2)
    codes = [w.returncode for w in workers]
    return 1 if failed or any(codes) else 0

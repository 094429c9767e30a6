"""Scheduler replicas as child processes (SIGKILL-able), sharing one database."""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from devtools.harness.procs import free_port, launch_scheduler, wait_until_serving

#: Short leases so that work held by a dead replica's runtimes comes back within the test.
REPLICA_ENV = {
    "AIJOB_LEASE_TTL_S": "3",
    "AIJOB_LEASE_GRACE_S": "1",
    "AIJOB_REAPER_INTERVAL_S": "0.5",
}


@dataclass
class Replica:
    url: str
    log_dir: Path
    name: str
    address: str = field(default_factory=lambda: f"127.0.0.1:{free_port()}")
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def start(self) -> None:
        self.start_with()

    def start_with(self, **env: str) -> None:
        self.starts += 1
        log = self.log_dir / f"{self.name}-{self.starts}.log"
        self.process = launch_scheduler(self.url, self.address, log, **REPLICA_ENV, **env)
        wait_until_serving(self.address)

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM, and the graceful stop must end with exit code 0."""
        assert self.process is not None
        self.process.terminate()
        assert self.process.wait(timeout=60) == 0

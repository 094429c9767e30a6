"""A MariaDB server owned by one test: its own datadir and port, to stop and start at will.

The machine's MariaDB serves every other test; this one exists to be taken away (reliability
S20). It runs the same ``mariadbd`` binary with no option files, on loopback only, without
grant tables (nothing but the test can reach it, and it is deleted afterwards).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from devtools.harness.procs import free_port

MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
INSTALL_DB = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"


@dataclass
class OwnMariaDB:
    root: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    def url(self, database: str) -> str:
        return f"mysql+asyncmy://root@127.0.0.1:{self.port}/{database}"

    def install(self) -> None:
        self.datadir.mkdir(parents=True)
        subprocess.run(
            [
                INSTALL_DB,
                "--no-defaults",
                f"--datadir={self.datadir}",
                "--user=root",
                "--skip-test-db",
                "--auth-root-authentication-method=normal",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def start(self) -> None:
        log = (self.root / "mariadbd.log").open("ab")
        self.process = subprocess.Popen(
            [
                MARIADBD,
                "--no-defaults",
                f"--datadir={self.datadir}",
                f"--port={self.port}",
                "--bind-address=127.0.0.1",
                f"--socket={self.root / 'mariadbd.sock'}",
                f"--pid-file={self.root / 'mariadbd.pid'}",
                "--user=root",
                "--skip-grant-tables",
                "--skip-log-bin",
                "--innodb-buffer-pool-size=64M",
                "--innodb-log-file-size=16M",
                "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_unicode_ci",
            ],
            stdout=log,
            stderr=log,
        )
        self._wait_for_port(timeout_s=60)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM), waited for."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=60)
        self.process = None

    def _wait_for_port(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            assert self.process is not None and self.process.poll() is None, "mariadbd exited"
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)  # polling a port another process is opening, bounded

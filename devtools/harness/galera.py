"""A 3-node MariaDB Galera cluster on loopback, owned by one test: the machine's ``mariadbd`` and
``galera-4``, each node with its own datadir and ports.

Node 1 is installed, bootstrapped, given the schema, and stopped cleanly, then its datadir is
copied to nodes 2 and 3, so all three hold the same state (the same cluster uuid and seqno) and
join by IST, without a full state transfer. The rsync transfer script still runs for IST, and
the stock one lets its rsync daemon drop to ``nobody`` when run as root (it writes no ``uid`` to
its rsyncd.conf), which cannot write the datadir: each node runs a copy that keeps root
(``_patched_sst_script``), in ``<basedir>/bin``, which mariadbd puts first on the script's PATH.
A node killed with SIGKILL is restarted the way the service scripts do it: its position
recovered first (``--wsrep-recover``), then started at that position, rejoining by IST from the
others' write-set cache.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
INSTALL_DB = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"
MARIADB = shutil.which("mariadb") or shutil.which("mysql") or "/usr/bin/mariadb"
PROVIDER = Path("/usr/lib/galera/libgalera_smm.so")
_RECOVERED = re.compile(r"WSREP: Recovered position: ([0-9a-f-]+:-?\d+)")


STOCK_SST = Path("/usr/bin/wsrep_sst_rsync")


def _patched_sst_script(into: Path) -> Path:
    """A copy of the stock rsync transfer script whose rsync daemon keeps root (and reads its
    common part from where the stock one lives); the directory holding it."""
    script = into / "wsrep_sst_rsync"
    if not script.exists():
        into.mkdir(parents=True, exist_ok=True)
        text = STOCK_SST.read_text()
        text = text.replace(
            '. $(dirname "$0")/wsrep_sst_common', f". {STOCK_SST.parent}/wsrep_sst_common"
        )
        text = text.replace("use chroot = no\n", "use chroot = no\nuid = root\ngid = root\n", 1)
        text = text.replace(
            "wsrep_check_programs rsync\n",
            "wsrep_check_programs rsync\nwsrep_log_info 'aijob-test patched rsync script'\n",
            1,
        )
        script.write_text(text)
        script.chmod(0o755)
    return into


def _ephemeral_floor() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_taken: set[int] = set()


def cluster_port() -> int:
    """A free loopback port below the ephemeral range. The nodes open many outgoing connections
    (the gcomm mesh, IST, clients); a listening port taken from the ephemeral range could be
    handed to one of them between our pick and the node's bind, and the node would fail to
    listen on it minutes later (an IST receiver, say)."""
    floor = _ephemeral_floor()
    for _ in range(1_000):
        port = random.randrange(max(1_025, floor - 20_000), floor)
        if port in _taken:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _taken.add(port)
        return port
    raise RuntimeError("no free port below the ephemeral range")


def galera_missing() -> str | None:
    """Why a cluster cannot start here, or None."""
    if not Path(MARIADBD).exists():
        return "mariadbd is not installed"
    if not PROVIDER.exists():
        return f"the galera-4 provider is not installed ({PROVIDER})"
    if not STOCK_SST.exists() or shutil.which("rsync") is None:
        return "the rsync state transfer (wsrep_sst_rsync, rsync) is not installed"
    return None


@dataclass
class Node:
    index: int
    root: Path
    cluster: list[int]
    port: int = field(default_factory=cluster_port)
    gcomm: int = field(default_factory=cluster_port)
    ist: int = field(default_factory=cluster_port)
    sst: int = field(default_factory=cluster_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "mariadbd.log"

    def url(self, database: str) -> str:
        return f"mysql+asyncmy://root@127.0.0.1:{self.port}/{database}"

    def _args(self) -> list[str]:
        gcomm = ",".join(f"127.0.0.1:{port}" for port in self.cluster)
        options = ";".join(
            [
                f"gmcast.listen_addr=tcp://127.0.0.1:{self.gcomm}",
                f"ist.recv_addr=127.0.0.1:{self.ist}",
                "gcache.size=256M",
                # Let the other nodes fall further behind before flow control pauses the writer:
                # they apply in parallel and catch up between bursts.
                "gcs.fc_limit=256",
                "gcs.fc_factor=0.9",
                # Loopback: notice a dead node in about 3 s (the default waits 5 s, then more).
                "evs.suspect_timeout=PT3S",
                "evs.inactive_timeout=PT6S",
                "evs.install_timeout=PT6S",
            ]
        )
        return [
            MARIADBD,
            "--no-defaults",
            # mariadbd puts <basedir>/bin first on its transfer scripts' PATH: the patched copy
            # lives in <cluster root>/bin; the rest stays where the packages put it.
            f"--basedir={self.root.parent}",
            "--plugin-dir=/usr/lib/mysql/plugin",
            "--character-sets-dir=/usr/share/mysql/charsets",
            "--lc-messages-dir=/usr/share/mysql",
            f"--datadir={self.datadir}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--socket={self.root / 'mariadbd.sock'}",
            f"--pid-file={self.root / 'mariadbd.pid'}",
            f"--log-error={self.log}",
            "--user=root",
            "--skip-grant-tables",
            # The single server's sizes (bench.galera compares the two): a smaller redo log
            # checkpoints more often, flushing pages the drain is still changing.
            "--innodb-buffer-pool-size=128M",
            "--innodb-log-file-size=96M",
            "--innodb-autoinc-lock-mode=2",
            # Durability comes from the other nodes holding the write set (docs/operations).
            "--innodb-flush-log-at-trx-commit=2",
            "--binlog-format=ROW",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_unicode_ci",
            "--wsrep-on=ON",
            f"--wsrep-provider={PROVIDER}",
            f"--wsrep-cluster-address=gcomm://{gcomm}",
            "--wsrep-cluster-name=aijob-test",
            f"--wsrep-node-name=node{self.index}",
            "--wsrep-node-address=127.0.0.1",
            f"--wsrep-provider-options={options}",
            "--wsrep-sst-method=rsync",
            f"--wsrep-sst-receive-address=127.0.0.1:{self.sst}",
            "--wsrep-slave-threads=1",
        ]

    def start(self, *extra: str) -> None:
        self.process = subprocess.Popen(
            [*self._args(), *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=self._env(),
        )

    def _env(self) -> dict[str, str]:
        scripts = _patched_sst_script(self.root.parent / "bin")
        return {**os.environ, "PATH": f"{scripts}:{os.environ.get('PATH', '/usr/bin:/bin')}"}

    def wait_for_port(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if self.process is not None and self.process.poll() is not None:
                    raise RuntimeError(f"node{self.index} exited: {self._tail()}") from None
                if time.monotonic() > deadline:
                    raise TimeoutError(f"node{self.index} did not open its port") from None
                time.sleep(0.1)  # polling a port another process is opening, bounded

    def local_state(self) -> str:
        """``wsrep_local_state`` (4: synced), or "" when the node does not answer."""
        done = subprocess.run(
            [
                MARIADB,
                "-h127.0.0.1",
                f"-P{self.port}",
                "-uroot",
                "-N",
                "-e",
                "SHOW GLOBAL STATUS LIKE 'wsrep_local_state'",
            ],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return done.stdout.split()[-1] if done.returncode == 0 and done.stdout.split() else ""

    def wait_synced(self, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        while self.local_state() != "4":
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"node{self.index} exited: {self._tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"node{self.index} did not sync: {self._tail()}")
            time.sleep(0.2)  # polling another process's state, bounded

    def stop(self) -> None:
        """A clean shutdown (SIGTERM), waited for."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=120)
        self.process = None

    def kill(self) -> None:
        """SIGKILL: the node dies with its state unsaved, as in a crash."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=60)
        self.process = None

    def restart_after_crash(self) -> None:
        """Recover the position (``--wsrep-recover``), then start at it: the node rejoins by IST."""
        done = subprocess.run(
            [*self._args(), "--wsrep-recover"],
            capture_output=True,
            timeout=180,
            check=False,
            env=self._env(),
        )
        found = _RECOVERED.findall(self.log.read_text(errors="replace"))
        if not found:
            raise RuntimeError(f"node{self.index}: no recovered position ({done.returncode})")
        self.start(f"--wsrep-start-position={found[-1]}")

    def _tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"


class GaleraCluster:
    """Three nodes; ``prepare`` runs against node 1 alone before the others copy its state."""

    def __init__(self, root: Path, size: int = 3) -> None:
        gcomm_ports = [cluster_port() for _ in range(size)]
        self.nodes = [
            Node(i + 1, root / f"node{i + 1}", gcomm_ports, gcomm=gcomm_ports[i])
            for i in range(size)
        ]

    def start(self, prepare: Callable[[str], None]) -> None:
        first = self.nodes[0]
        first.datadir.mkdir(parents=True)
        subprocess.run(
            [
                INSTALL_DB,
                "--no-defaults",
                f"--datadir={first.datadir}",
                "--user=root",
                "--skip-test-db",
                "--auth-root-authentication-method=normal",
            ],
            check=True,
            capture_output=True,
            timeout=180,
        )
        first.start("--wsrep-new-cluster")
        first.wait_synced()
        prepare(first.url("mysql"))
        first.stop()  # a clean stop writes its position: the copies start from it
        for node in self.nodes[1:]:
            shutil.copytree(first.datadir, node.datadir)
        first.start("--wsrep-new-cluster")
        first.wait_synced()
        for node in self.nodes[1:]:
            node.start()
        for node in self.nodes[1:]:
            node.wait_synced()

    def stop(self) -> None:
        for node in reversed(self.nodes):
            try:
                node.stop()
            except subprocess.TimeoutExpired:
                node.kill()


async def create_schema(server_url: str) -> None:
    """Database ``aijob`` at the newest schema on the node at ``server_url`` (its ``mysql``
    database's URL): what ``GaleraCluster.start`` runs on node 1 before the others copy it."""
    from sqlalchemy import text

    from scheduler_service.sql.db.engine import create_engine
    from scheduler_service.sql.migrate import migrate

    admin = create_engine(server_url, pool_size=1)
    async with admin.begin() as conn:
        await conn.execute(text("CREATE DATABASE aijob"))
    await admin.dispose()
    await migrate(server_url.rsplit("/", 1)[0] + "/aijob")

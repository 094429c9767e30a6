"""One writer for every replica: the first node of an ordered list that is reachable and ready.

``AIJOB_DATABASE_URL`` names the preferred node and ``AIJOB_DATABASE_FAILOVER_HOSTS`` the others,
in order. Each new connection goes to the first node that accepts it and is ready — for a Galera
node, ``wsrep_ready=ON`` and ``wsrep_local_state=4`` (synced); a server without Galera (or with it
off) is ready when it answers — so every replica, trying the same list in the same order, writes
through the same node, and Galera's certification conflicts between writers stay rare. A dead
node is left at the next connection (pre-ping finds the pooled ones dead); the scheduler's health
loop probes the list and, once an earlier node is ready again, empties the pool so that new
connections go back to it (:meth:`WriterChoice.preferred`).

With ``AIJOB_DATABASE_CAUSAL_READS`` each session asks Galera for causal reads
(``wsrep_sync_wait=3``: reads, updates and deletes wait until the node has applied every write
set committed before them cluster-wide), which is what replicas writing through different nodes
(a router without single-writer routing) need to read their own and each other's writes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncmy
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import create_async_engine

__all__ = ["Node", "WriterChoice", "parse_nodes"]

log = logging.getLogger(__name__)

#: Galera's "Synced" local state.
SYNCED = "4"


@dataclass(frozen=True, slots=True)
class Node:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_nodes(text: str | Sequence[str]) -> list[Node]:
    """``host:port`` entries (comma-separated, or a list); the port defaults to 3306."""
    entries = text.split(",") if isinstance(text, str) else list(text)
    nodes = []
    for entry in (e.strip() for e in entries):
        if not entry:
            continue
        host, sep, port = entry.rpartition(":")
        if not sep:
            host, port = entry, "3306"
        if not host or not port.isdigit():
            raise ValueError(f"expected host:port, got {entry!r}")
        nodes.append(Node(host, int(port)))
    return nodes


async def _status(conn: Any, query: str) -> dict[str, str]:
    async with conn.cursor() as cursor:
        await cursor.execute(query)
        return {str(name).lower(): str(value) for name, value in await cursor.fetchall()}


async def galera_ready(conn: Any) -> bool | None:
    """True for a synced, ready Galera node; False for one that is not; None without Galera."""
    try:
        wsrep_on = await _status(conn, "SHOW GLOBAL VARIABLES LIKE 'wsrep_on'")
    except Exception:
        return None
    if wsrep_on.get("wsrep_on", "OFF").upper() != "ON":
        return None
    status = await _status(
        conn,
        "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_local_state')",
    )
    return status.get("wsrep_ready") == "ON" and status.get("wsrep_local_state") == SYNCED


class WriterChoice:
    """The ordered nodes, and connections to the first ready one."""

    def __init__(
        self,
        url: str | URL,
        failover: Sequence[Node],
        *,
        causal_reads: bool = False,
        connect_timeout_s: float = 3.0,
        read_timeout_s: float | None = None,
    ) -> None:
        parsed = make_url(url)
        # The dialect's own connection arguments (FOUND_ROWS among them: matched-row counts).
        dialect = create_async_engine(parsed).dialect
        _args, kwargs = dialect.create_connect_args(parsed)
        self._kwargs = {**kwargs, "connect_timeout": connect_timeout_s}
        if read_timeout_s:
            self._kwargs["read_timeout"] = read_timeout_s
        self.nodes = [Node(parsed.host or "127.0.0.1", parsed.port or 3306), *failover]
        self._causal_reads = causal_reads
        #: The node the latest connection went to.
        self.current: Node | None = None

    async def _open(self, node: Node) -> Any | None:
        """A connection to ``node`` if it is reachable and ready, else None."""
        try:
            conn = await asyncmy.connect(**{**self._kwargs, "host": node.host, "port": node.port})
        except Exception:
            return None
        try:
            ready = await galera_ready(conn)
            if ready is False:
                conn.close()
                return None
            if ready and self._causal_reads:
                async with conn.cursor() as cursor:
                    await cursor.execute("SET SESSION wsrep_sync_wait = 3")
        except Exception:
            conn.close()
            return None
        return conn

    async def connect(self) -> Any:
        """A DBAPI connection to the first ready node (the engine's ``async_creator``)."""
        for node in self.nodes:
            conn = await self._open(node)
            if conn is not None:
                if node != self.current:
                    log.warning(
                        "database writer is now %s",
                        node,
                        extra={"action": "db_writer", "node": str(node)},
                    )
                self.current = node
                return conn
        # The caller maps this to UNAVAILABLE, as any unreachable database.
        raise asyncmy.errors.OperationalError(2003, "no database node is reachable and ready")

    async def preferred(self) -> Node | None:
        """The first ready node now (a probe connection to each until one is)."""
        for node in self.nodes:
            conn = await self._open(node)
            if conn is not None:
                conn.close()
                return node
        return None

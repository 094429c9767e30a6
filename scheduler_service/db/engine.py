"""Building the async engine for MySQL/MariaDB (asyncmy) or the embedded SQLite default."""

from __future__ import annotations

import socket
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import PoolResetState

from scheduler_service.db.driver import DriverEngine
from scheduler_service.db.failover import WriterChoice

__all__ = ["create_engine", "is_sqlite", "mark_committed"]

#: Set on a pooled connection whose transaction has just committed: the pool's rollback when it
#: comes back would be one more round trip that ends nothing.
_COMMITTED = "aijob_committed"


def is_sqlite(url: str | URL) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def create_engine(
    url: str | URL,
    *,
    pool_size: int = 20,
    writer: WriterChoice | None = None,
    read_timeout_s: float | None = None,
    connect_timeout_s: float | None = None,
) -> AsyncEngine:
    """An engine with the session settings the lifecycle relies on.

    MySQL runs at READ COMMITTED: every statement sees the latest commits and InnoDB takes fewer
    gap locks on the insert-heavy job and outbox tables; correctness lives in the guarded UPDATEs
    and unique keys, not in snapshots. SQLite runs in WAL mode with a busy timeout so readers and
    the single writer do not fail each other.
    """
    parsed = make_url(url)
    if is_sqlite(parsed):
        engine = create_async_engine(parsed, connect_args={"timeout": 30}, hide_parameters=True)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    # With failover nodes (or causal reads), each connection goes to the first ready node.
    creator = {"async_creator": writer.connect} if writer is not None else {}
    # A connection that stops answering without closing (a silent partition) must fail its
    # statement, not hang it for ever: the driver's read timeout drops it.
    timeouts = {"read_timeout": read_timeout_s} if read_timeout_s else {}
    if connect_timeout_s:
        timeouts["connect_timeout"] = connect_timeout_s
    engine = create_async_engine(
        parsed,
        **creator,
        connect_args=timeouts,
        isolation_level="READ COMMITTED",
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        pool_recycle=1800,
        # The rollback on return is ours (_reset_unless_committed): skipped after a commit.
        pool_reset_on_return=None,
        # Statement parameters hold snapshots and outputs: keep them out of exception text.
        hide_parameters=True,
    )
    if engine.dialect.driver == "asyncmy":
        # Repeated Core statements go straight to the driver (scheduler_service/db/driver.py).
        engine = DriverEngine(engine.sync_engine)
    event.listen(engine.sync_engine, "connect", _tcp_keepalive)
    event.listen(engine.sync_engine.pool, "reset", _reset_unless_committed)
    return engine


def mark_committed(conn: AsyncConnection) -> None:
    """``conn``'s transaction has committed and nothing runs on it before it goes back to the
    pool: its return needs no rollback."""
    conn.info[_COMMITTED] = True


def _reset_unless_committed(dbapi_conn: Any, record: Any, state: PoolResetState) -> None:
    """The pool's rollback on return (SQLAlchemy's default), unless the connection's last
    transaction committed just before (``mark_committed``) or SQLAlchemy already rolled it back.
    A connection returned any other way (an error, a cancelled task) is rolled back as always."""
    committed = record is not None and record.info.pop(_COMMITTED, False)
    if committed or state.transaction_was_reset or not state.asyncio_safe:
        return
    dbapi_conn.rollback()


#: TCP keepalive on every database connection: an idle pooled connection whose peer vanished is
#: found dead within about a minute instead of the kernel's two hours.
KEEPALIVE_IDLE_S = 30
KEEPALIVE_INTERVAL_S = 10
KEEPALIVE_PROBES = 3


def _tcp_keepalive(dbapi_conn: Any, _record: Any) -> None:
    raw = getattr(dbapi_conn, "_connection", None)
    transport = getattr(raw, "_transport", None)
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (
        ("TCP_KEEPIDLE", KEEPALIVE_IDLE_S),
        ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL_S),
        ("TCP_KEEPCNT", KEEPALIVE_PROBES),
    ):
        if hasattr(socket, option):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()

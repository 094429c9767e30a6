"""Building the async engine for MySQL/MariaDB (asyncmy) or the embedded SQLite default."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import event, exc
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import PoolResetState

from scheduler_service.sql.db.driver import DriverEngine
from scheduler_service.sql.db.failover import WriterChoice
from scheduler_service.sql.db.round_trips import watch_commits

__all__ = ["create_engine", "is_sqlite", "mark_committed"]

#: Set on a pooled connection whose transaction has just committed: the pool's rollback when it
#: comes back would be one more round trip that ends nothing.
_COMMITTED = "aijob_committed"
#: When a pooled connection was last known alive: connected, or returned to the pool.
_ALIVE_AT = "aijob_alive_at"
#: A pooled connection returned within this long is handed out without a ping (HikariCP's
#: ``aliveBypassWindowMs``, 500 ms there too). Under load a connection comes back and goes out
#: again within milliseconds, and a ping on every checkout was one more round trip per
#: transaction. One idle longer (an outage, a restart, a partition) is pinged as before.
PING_AFTER_IDLE_S = 0.5


def is_sqlite(url: str | URL) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def create_engine(
    url: str | URL,
    *,
    pool_size: int = 20,
    ping_after_idle_s: float = PING_AFTER_IDLE_S,
    writer: WriterChoice | None = None,
    read_timeout_s: float | None = None,
    connect_timeout_s: float | None = None,
) -> AsyncEngine:
    """An engine with the session settings the lifecycle relies on.

    MySQL runs at READ COMMITTED: every statement sees the latest commits and InnoDB takes fewer
    gap locks on the insert-heavy job and outbox tables; correctness lives in the guarded UPDATEs
    and unique keys, not in snapshots. SQLite runs in WAL mode with a busy timeout so readers and
    the single writer do not fail each other. A pooled connection idle for longer than
    ``ping_after_idle_s`` is pinged before it is handed out (0: every time).
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
        # Pinged on checkout only after an idle spell: _ping_if_idle.
        pool_pre_ping=False,
        pool_recycle=1800,
        # The rollback on return is ours (_reset_unless_committed): skipped after a commit.
        pool_reset_on_return=None,
        # Statement parameters hold snapshots and outputs: keep them out of exception text.
        hide_parameters=True,
    )
    if engine.dialect.driver == "asyncmy":
        # Repeated Core statements go straight to the driver (scheduler_service/sql/db/driver.py).
        engine = DriverEngine(engine.sync_engine)
    event.listen(engine.sync_engine, "connect", _tcp_keepalive)
    if isinstance(engine, DriverEngine):
        watch_commits(engine)
    event.listen(engine.sync_engine.pool, "reset", _reset_unless_committed)
    event.listen(engine.sync_engine.pool, "connect", _alive_now)
    event.listen(engine.sync_engine.pool, "checkin", _alive_now)
    event.listen(engine.sync_engine.pool, "checkout", _ping_if_idle(engine, ping_after_idle_s))
    return engine


def needs_ping(alive_at: float | None, now: float, after_idle_s: float) -> bool:
    """Whether a pooled connection last known alive at ``alive_at`` (never: None) is pinged
    before it is handed out at ``now``."""
    return alive_at is None or now - alive_at >= after_idle_s


def _alive_now(_dbapi_conn: Any, record: Any) -> None:
    record.info[_ALIVE_AT] = time.monotonic()


def _ping_if_idle(engine: AsyncEngine, after_idle_s: float) -> Callable[[Any, Any, Any], None]:
    """The pool's pre-ping, only for a connection idle ``after_idle_s`` or longer. A dead one
    is handled as SQLAlchemy's pre-ping handles it: every connection pooled before now is
    discarded (they went through the same outage) and a new one is opened in its place."""
    dialect = engine.dialect

    def checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        if not needs_ping(record.info.get(_ALIVE_AT), time.monotonic(), after_idle_s):
            return
        try:
            dialect.do_ping(dbapi_conn)
        except dialect.loaded_dbapi.Error as error:
            if not dialect.is_disconnect(error, dbapi_conn, None):
                raise
            raise exc.InvalidatePoolError() from error

    return checkout


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

"""The database clock: every deadline is computed and compared in SQL, never on the app's clock.

``db_now()`` is the current UTC time of the database and ``db_now(offset_ms)`` a time relative to
it, so ``lockUntil``, ``availableAt`` and the reaper's predicates agree across replicas whose clocks
differ (reliability S8). MySQL/MariaDB and SQLite render it differently; values compare and read
back the same on both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Integer, bindparam
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from scheduler_service.sql.db.base import Timestamp

__all__ = ["DatabaseClock", "db_now", "db_today"]


class db_now(FunctionElement[datetime]):
    """UTC now of the database, plus ``offset_ms`` milliseconds (may be negative).

    ``offset_ms`` may be a SQL expression over the row, e.g. ``-AiJob.timeoutMs``.
    """

    type = Timestamp
    inherit_cache = True
    name = "db_now"

    def __init__(self, offset_ms: int | ColumnElement[int] = 0) -> None:
        if isinstance(offset_ms, int):
            offset_ms = bindparam(None, offset_ms, type_=Integer, unique=True)
        super().__init__(offset_ms)


def _offset(element: db_now, compiler: SQLCompiler, **kw: Any) -> str:
    return str(compiler.process(element.clauses, **kw))


@compiles(db_now, "mysql")
@compiles(db_now, "mariadb")
def _db_now_mysql(element: db_now, compiler: SQLCompiler, **kw: Any) -> str:
    # Microsecond intervals keep fractional seconds; DATETIME(3) columns round them to ms.
    return (
        f"(UTC_TIMESTAMP(3) + INTERVAL (({_offset(element, compiler, **kw)}) * 1000) MICROSECOND)"
    )


@compiles(db_now, "sqlite")
def _db_now_sqlite(element: db_now, compiler: SQLCompiler, **kw: Any) -> str:
    # SQLAlchemy stores SQLite datetimes as 'YYYY-MM-DD HH:MM:SS.ffffff'; strftime's %f gives
    # milliseconds, so three zeros complete the microseconds and string comparison stays exact.
    offset = _offset(element, compiler, **kw)
    return (
        "(strftime('%Y-%m-%d %H:%M:%f', 'now', "
        f"printf('%+.3f seconds', ({offset}) / 1000.0)) || '000')"
    )


class db_today(FunctionElement[datetime]):
    """Midnight (UTC) that began the database's current day."""

    type = Timestamp
    inherit_cache = True
    name = "db_today"


@compiles(db_today, "mysql")
@compiles(db_today, "mariadb")
def _db_today_mysql(element: db_today, compiler: SQLCompiler, **kw: Any) -> str:
    return "CAST(UTC_DATE() AS DATETIME(3))"


@compiles(db_today, "sqlite")
def _db_today_sqlite(element: db_today, compiler: SQLCompiler, **kw: Any) -> str:
    return "(date('now') || ' 00:00:00.000000')"


class DatabaseClock:
    """The database's now without a query each time: a sample of ``db_now()`` carried forward by
    the monotonic clock (never the host's wall clock, reliability S8). The reaper samples it
    every sweep; ``now()`` is None before the first sample."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._base: tuple[datetime, float] | None = None

    def sampled(self, db_time: datetime) -> None:
        self._base = (db_time, self._monotonic())

    def now(self) -> datetime | None:
        if self._base is None:
            return None
        at, mono = self._base
        return at + timedelta(seconds=self._monotonic() - mono)

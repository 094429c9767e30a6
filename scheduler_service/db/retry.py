"""Re-run a whole transactional unit when MySQL reports a deadlock or a lock-wait timeout.

InnoDB rolls back the victim of a deadlock (1213) and may roll back on lock-wait timeout (1205);
the manual's advice is to re-issue the whole transaction, never a single statement. SQLite's
"database is locked" is the same situation on the embedded default.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from scheduler_service.errors import DatabaseUnavailableError

__all__ = ["DEADLOCK", "LOCK_WAIT_TIMEOUT", "is_retryable_conflict", "run_transaction"]

log = logging.getLogger(__name__)

T = TypeVar("T")

DEADLOCK = 1213
LOCK_WAIT_TIMEOUT = 1205
_RETRYABLE_MYSQL_ERRORS = frozenset({DEADLOCK, LOCK_WAIT_TIMEOUT})
#: MySQL client errors that mean the server is gone, not that the statement is wrong.
_UNAVAILABLE_MYSQL_ERRORS = frozenset({2002, 2003, 2006, 2013, 2055})

MAX_ATTEMPTS = 5


def _mysql_errno(exc: DBAPIError) -> int | None:
    args = getattr(exc.orig, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def is_retryable_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is a deadlock or lock wait that re-running the transaction can cure."""
    if not isinstance(exc, DBAPIError):
        return False
    if _mysql_errno(exc) in _RETRYABLE_MYSQL_ERRORS:
        return True
    return "database is locked" in str(exc.orig)


def _is_unavailable(exc: BaseException) -> bool:
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(exc, OperationalError) and _mysql_errno(exc) in _UNAVAILABLE_MYSQL_ERRORS


async def run_transaction(
    engine: AsyncEngine,
    unit: Callable[[AsyncConnection], Awaitable[T]],
    *,
    attempts: int = MAX_ATTEMPTS,
    base_delay_s: float = 0.005,
) -> T:
    """Run ``unit`` in one transaction, re-running all of it on a retryable conflict.

    ``unit`` must be safe to run again from the start: it sees a fresh transaction each time.
    A database that cannot be reached surfaces as :class:`DatabaseUnavailableError`.
    """
    for attempt in range(1, attempts + 1):
        try:
            async with engine.begin() as conn:
                return await unit(conn)
        except DBAPIError as exc:
            if _is_unavailable(exc):
                raise DatabaseUnavailableError("the database is unavailable, try again") from exc
            if attempt == attempts or not is_retryable_conflict(exc):
                raise
            log.warning(
                "transaction conflict, re-running",
                extra={"action": "db_retry", "attempt": attempt, "errno": _mysql_errno(exc)},
            )
            # Full jitter keeps the re-runs of two deadlocked transactions apart.
            await asyncio.sleep(random.uniform(0, base_delay_s * 2**attempt))
    raise AssertionError("unreachable")

"""Reading database errors: which ones a re-run can cure and which mean "unreachable".

InnoDB rolls back the victim of a deadlock (1213) and may roll back on lock-wait timeout (1205);
the manual's advice is to re-issue the whole transaction, never a single statement. SQLite's
"database is locked" is the same situation on the embedded default. The unit of work
(:mod:`scheduler_service.sql.uow`) acts on these answers.
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, OperationalError

__all__ = [
    "DEADLOCK",
    "LOCK_WAIT_TIMEOUT",
    "is_missing_legacy_status",
    "is_retryable_conflict",
    "is_unavailable",
    "mysql_errno",
]

DEADLOCK = 1213
LOCK_WAIT_TIMEOUT = 1205
_RETRYABLE_MYSQL_ERRORS = frozenset({DEADLOCK, LOCK_WAIT_TIMEOUT})
#: MySQL errors that mean the server is gone or not ready, not that the statement is wrong:
#: client-side connection failures, and Galera's "WSREP has not yet prepared node" (1047).
_UNAVAILABLE_MYSQL_ERRORS = frozenset({1047, 2002, 2003, 2006, 2013, 2055})
#: "Table doesn't exist": the schema is gone (a restore in progress, a dropped database). Not
#: the request's fault, and nothing a stack trace per call would help with.
NO_SUCH_TABLE = 1146


def mysql_errno(exc: DBAPIError) -> int | None:
    args = getattr(exc.orig, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def is_retryable_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is a deadlock or lock wait that re-running the transaction can cure."""
    if not isinstance(exc, DBAPIError):
        return False
    if mysql_errno(exc) in _RETRYABLE_MYSQL_ERRORS:
        return True
    return "database is locked" in str(exc.orig)


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot be reached (safe to retry later)."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    if isinstance(exc, DBAPIError) and (
        mysql_errno(exc) == NO_SUCH_TABLE or "no such table" in str(exc.orig)
    ):
        return True
    return isinstance(exc, OperationalError) and mysql_errno(exc) in _UNAVAILABLE_MYSQL_ERRORS


#: "Unknown column": MySQL/MariaDB's errno for a column the statement names and the table lacks.
UNKNOWN_COLUMN = 1054


def is_missing_legacy_status(exc: BaseException) -> bool:
    """Whether ``exc`` says the legacy ``status`` column is gone: the contract step ran while
    this replica still wrote it (docs/operations/legacy-migration.md)."""
    if not isinstance(exc, DBAPIError):
        return False
    text = str(exc.orig)
    if mysql_errno(exc) == UNKNOWN_COLUMN:
        return "'status'" in text or ".status'" in text
    return "no such column: status" in text or "has no column named status" in text

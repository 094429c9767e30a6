"""A tripwire for the whole test suite: any SQL that writes ``lifecycleStatus`` must come from the
SQL job store or the claim (or a schema migration). Installed on every engine by conftest."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import greenlet
from sqlalchemy import event
from sqlalchemy.engine import Engine

ROOT = Path(__file__).resolve().parents[2]
ALLOWED_WRITERS = (
    str(ROOT / "scheduler_service" / "sql" / "job_store.py"),
    str(ROOT / "scheduler_service" / "sql" / "claims.py"),
    str(ROOT / "migrations" / "versions"),
)
_WRITE = re.compile(r"^\s*(UPDATE|INSERT)\b.*\bAiAnalysisJob\b", re.IGNORECASE | re.DOTALL)


class LifecycleWriteOutsideStore(AssertionError):
    pass


def _writes_lifecycle_status(statement: str) -> bool:
    assignments = statement.split("WHERE", maxsplit=1)[0]
    return bool(_WRITE.match(statement)) and "lifecycleStatus" in assignments


def _stacks() -> Iterator[FrameType | None]:
    """This thread's stack, then the stacks of the greenlets above it: SQLAlchemy's asyncio layer
    runs the driver in a child greenlet, so the awaiting coroutine's frames live in the parent."""
    yield sys._getframe(1)
    current = greenlet.getcurrent().parent
    while current is not None:
        yield current.gr_frame
        current = current.parent


def _issued_by_allowed_writer() -> bool:
    for top in _stacks():
        frame = top
        while frame is not None:
            if frame.f_code.co_filename.startswith(ALLOWED_WRITERS):
                return True
            frame = frame.f_back
    return False


def _check(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
    if _writes_lifecycle_status(statement) and not _issued_by_allowed_writer():
        raise LifecycleWriteOutsideStore(
            f"lifecycleStatus written outside the SQL job store: {statement[:200]}"
        )


def install() -> None:
    if not event.contains(Engine, "before_cursor_execute", _check):
        event.listen(Engine, "before_cursor_execute", _check)

"""Index hints for the few reads whose plan MariaDB's estimates can turn into a table scan."""

from __future__ import annotations

from typing import Any, TypeVar, cast

from sqlalchemy import Select, Table

from scheduler_service.sql.db.models import AiJob

__all__ = ["DISPATCH_INDEX", "RUNNING_INDEX", "by_dispatch_index", "running_rows_by_index"]

SelectT = TypeVar("SelectT", bound=Select[Any])

#: The index a scan of running rows reads on MySQL / MariaDB (running jobs by lease deadline).
RUNNING_INDEX = "idx_lifecycleStatus_lockUntil"
#: The index the claim reads queued rows through, in the order it takes them.
DISPATCH_INDEX = "idx_fair_dispatch"

_jobs = cast(Table, AiJob.__table__)


def _through(statement: SelectT, index: str) -> SelectT:
    hint = f"FORCE INDEX ({index})"
    return statement.with_hint(_jobs, hint, "mysql").with_hint(_jobs, hint, "mariadb")


def running_rows_by_index(statement: SelectT) -> SelectT:
    """``statement``, a read of running jobs (``lifecycleStatus = 'running'``), told to find them
    through their index. Right after a burst of status changes InnoDB's estimate of the running
    range still counts the index entries it has not purged, and the optimizer then read the whole
    job table to count a few dozen running rows (every dispatch round's running count per model
    key did, in a drain's slow log): a read that grows with the table, not with the fleet. Other
    dialects ignore the hint."""
    return _through(statement, RUNNING_INDEX)


def by_dispatch_index(statement: SelectT) -> SelectT:
    """``statement``, a read of queued (or running) jobs in the dispatch index's order (the
    claim's candidates; a priority's first and last fair places), told to walk that index and
    stop when it has what it reads. While the table's statistics still describe it as it was
    before a burst of creates (InnoDB recounts them in the background, after a tenth of the rows
    changed), the optimizer read and sorted the whole table for the claim instead: a drain's slow
    log saw each of its first rounds after 2,000 creates examine every row (2,066 to 2,258 rows for
    32 to 256 taken, 4 to 11 ms a statement). Other dialects ignore the hint."""
    return _through(statement, DISPATCH_INDEX)

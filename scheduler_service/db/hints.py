"""Index hints for the few reads whose plan MariaDB's estimates can turn into a table scan."""

from __future__ import annotations

from typing import Any, TypeVar, cast

from sqlalchemy import Select, Table

from scheduler_service.db.models import AiJob

__all__ = ["RUNNING_INDEX", "running_rows_by_index"]

SelectT = TypeVar("SelectT", bound=Select[Any])

#: The index a scan of running rows reads on MySQL / MariaDB (running jobs by lease deadline).
RUNNING_INDEX = "idx_lifecycleStatus_lockUntil"

_jobs = cast(Table, AiJob.__table__)


def running_rows_by_index(statement: SelectT) -> SelectT:
    """``statement``, a read of running jobs (``lifecycleStatus = 'running'``), told to find them
    through their index. Right after a burst of status changes InnoDB's estimate of the running
    range still counts the index entries it has not purged, and the optimizer then read the whole
    job table to count a few dozen running rows (every dispatch round's running count per model
    key did, in a drain's slow log): a read that grows with the table, not with the fleet. Other
    dialects ignore the hint."""
    hint = f"FORCE INDEX ({RUNNING_INDEX})"
    return statement.with_hint(_jobs, hint, "mysql").with_hint(_jobs, hint, "mariadb")

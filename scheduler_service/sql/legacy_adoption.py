"""Handing System A's job types to the engine (M-AI-04): ``AdminService.AdoptLegacyJobs`` and the
intake that keeps taking in the rows System A's producer still inserts afterwards.

Adopting a type removes it from ``AiLegacyJobType`` (the engine owns its rows from then on) and
takes in its legacy ``pending`` rows: each gets a snapshot built from the row and the learner's
answer, the engine's columns from the type's definition, and its ``ai.job.enqueue`` event — by
compare-and-set on its legacy state, in one transaction per batch. A row whose answer is missing
fails with LEGACY_ANSWER_NOT_FOUND. Rows the legacy worker is running (``processing``, no engine
lease) are left to finish there: the reaper never expires a running row without a lease."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.exc import SQLAlchemyError

from scheduler_service.core.errors import InvalidRequestError, LegacyAdoptionError
from scheduler_service.core.events import EventType
from scheduler_service.core.job_registry import JobRegistry
from scheduler_service.core.legacy_snapshots import (
    ADOPTABLE,
    LegacyAnswer,
    LegacyRow,
    engine_columns,
    missing_answer,
    snapshot_of,
)
from scheduler_service.core.records import JobError
from scheduler_service.sql import job_statements as lifecycle_sql
from scheduler_service.sql import legacy_statements as legacy_sql
from scheduler_service.sql.db.driver import send_queued
from scheduler_service.sql.uow import SqlTransaction, SqlUnitOfWork
from shared.error_codes import ErrorCode

__all__ = ["Adoption", "LegacyAdoption"]

log = logging.getLogger(__name__)

#: Rows taken in per transaction.
BATCH = 100
#: Rows a dry run looks at, at most.
DRY_RUN_ROWS = 100_000


@dataclass(frozen=True, slots=True)
class Adoption:
    adopted: int
    left_to_legacy: int


@dataclass(frozen=True, slots=True)
class _Batch:
    seen: int
    taken: int
    failed: int


class LegacyAdoption:
    def __init__(self, uow: SqlUnitOfWork, registry: JobRegistry, *, answer_query: str) -> None:
        self._uow = uow
        self._registry = registry
        self._answer_query = answer_query

    async def adopt(self, job_type: str, *, dry_run: bool) -> Adoption:
        """Hand ``job_type`` to the engine; with ``dry_run``, only count what would happen."""
        self._check_adoptable(job_type)
        if dry_run:
            return await self._uow.read(lambda tx: self._would_adopt(tx, job_type))

        async def first(tx: SqlTransaction) -> _Batch:
            await _require_expanded(tx)
            await legacy_sql.release(tx.conn, job_type)
            return await self._take_in(tx, [job_type], recent_only=False)

        batch = await self._uow.run(first)
        adopted, failed = batch.taken, batch.failed
        while batch.seen == BATCH:
            batch = await self._uow.run(lambda tx: self._take_in(tx, [job_type], recent_only=False))
            adopted, failed = adopted + batch.taken, failed + batch.failed
        left = await self._uow.read(lambda tx: legacy_sql.left_to_legacy(tx.conn, job_type))
        log.info(
            "legacy job type adopted",
            extra={
                "action": "legacy_adopted",
                "jobType": job_type,
                "adopted": adopted,
                "failed": failed,
                "leftToLegacy": left,
            },
        )
        return Adoption(adopted, left)

    async def notice_schema(self) -> bool:
        """Whether the legacy columns are there; the engine stops writing ``status`` once the
        contract step has dropped it (and would start again on a restored backup)."""
        expanded = await self._uow.read(lambda tx: legacy_sql.has_legacy_status(tx.conn))
        lifecycle_sql.set_shadow_write(expanded)
        return expanded

    async def take_in_recent(self) -> int:
        """Take in the rows legacy code inserted for types already adopted (System A's
        producer may keep writing ``pending`` rows until it is switched to CreateJob); the
        reaper calls it every sweep. Returns how many were queued on the engine."""
        if not await self.notice_schema():
            return 0

        async def adopted_types(tx: SqlTransaction) -> list[str]:
            owned = set(await legacy_sql.owned_types(tx.conn))
            return sorted(t for t in ADOPTABLE if t in self._registry and t not in owned)

        types = await self._uow.read(adopted_types)
        if not types:
            return 0
        batch = await self._uow.run(lambda tx: self._take_in(tx, types, recent_only=True))
        return batch.taken

    def _check_adoptable(self, job_type: str) -> None:
        if job_type not in ADOPTABLE or job_type not in self._registry:
            adoptable = ", ".join(sorted(t for t in ADOPTABLE if t in self._registry))
            raise InvalidRequestError(
                f"job_type must be a legacy job type this engine runs ({adoptable})",
                field="job_type",
                code=ErrorCode.JOB_TYPE_UNKNOWN,
            )

    async def _would_adopt(self, tx: SqlTransaction, job_type: str) -> Adoption:
        await _require_expanded(tx)
        rows = await legacy_sql.waiting_rows(tx.conn, [job_type], limit=DRY_RUN_ROWS)
        adoptable = 0
        for row in rows:
            if await self._answer(tx, row) is not None:
                adoptable += 1
        return Adoption(adoptable, await legacy_sql.left_to_legacy(tx.conn, job_type))

    async def _answer(self, tx: SqlTransaction, row: LegacyRow) -> LegacyAnswer | None:
        # The writes queued for the next round trip go first: their failure is not the query's.
        await send_queued(tx.conn)
        try:
            return await legacy_sql.answer_of(tx.conn, self._answer_query, row)
        except SQLAlchemyError:  # a database error, or a statement that returns no rows
            raise LegacyAdoptionError(
                "the legacy answer query failed: set AIJOB_LEGACY_ANSWER_QUERY to one that "
                "fits the application's tables"
            ) from None

    async def _take_in(self, tx: SqlTransaction, types: list[str], *, recent_only: bool) -> _Batch:
        rows = await legacy_sql.waiting_rows(tx.conn, types, limit=BATCH, recent_only=recent_only)
        taken = failed = 0
        for row in rows:
            definition = self._registry.get(row.job_type)
            answer = await self._answer(tx, row)
            prepared = (
                missing_answer(row) if answer is None else snapshot_of(row, answer, definition)
            )
            if isinstance(prepared, JobError):
                failed += await _fail(tx, row, prepared)
            elif await legacy_sql.take_in(tx.conn, row, engine_columns(row, definition), prepared):
                await tx.emit(
                    EventType.ENQUEUE,
                    job_id=row.job_id,
                    job_type=row.job_type,
                    queueName=definition.routing.queue_name,
                    priority=definition.routing.default_priority,
                )
                taken += 1
        return _Batch(len(rows), taken, failed)


async def _fail(tx: SqlTransaction, row: LegacyRow, error: JobError) -> int:
    if not await tx.jobs.fail_queued(row.job_id, error):
        return 0  # the legacy worker started it meanwhile
    await tx.emit(EventType.FAILED, job_id=row.job_id, job_type=row.job_type, errorCode=error.code)
    return 1


async def _require_expanded(tx: SqlTransaction) -> None:
    if not await legacy_sql.has_legacy_status(tx.conn):
        raise LegacyAdoptionError(
            "the legacy columns are gone (the contract step ran): there is nothing to adopt"
        )

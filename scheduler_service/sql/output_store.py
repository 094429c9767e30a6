"""The output chunks on SQL (``tx.outputs``): the table ``AiJobOutputChunk``, keyed by job,
attempt and offset, so a chunk sent twice (a report repeated after a reconnect) is stored once."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any
from typing import cast as typed

from sqlalchemy import (
    BindParameter,
    Integer,
    LargeBinary,
    Table,
    bindparam,
    cast,
    delete,
    func,
    select,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.core.output_records import ChunkRow, FeedState, Stored, written_text
from scheduler_service.core.state_machine import TERMINAL
from scheduler_service.ports import OutputStore
from scheduler_service.sql import job_statements as sql
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.multirow import insert_rows
from scheduler_service.sql.db.output_models import AiJobOutputChunk

__all__ = ["SqlOutputStore"]

_chunks = typed(Table, AiJobOutputChunk.__table__)
_k = _chunks.c
_j = sql.jobs.c
_IDS: BindParameter[Any] = bindparam("b_ids", expanding=True)

_STORED = (
    select(
        _k.jobId,
        _k.attemptNo,
        func.max(_k.endOffset),
        # Bytes, on every dialect: the length of the text as binary.
        func.sum(func.length(cast(_k.text, LargeBinary))),
        func.count(),
    )
    .where(_k.jobId.in_(_IDS))
    .group_by(_k.jobId, _k.attemptNo)
)
_FROM = (
    select(_k.startOffset, _k.text)
    .where(
        _k.jobId == bindparam("b_id"),
        _k.attemptNo == bindparam("b_attempt"),
        _k.endOffset > bindparam("b_offset"),
    )
    .order_by(_k.startOffset)
)
_END = (
    select(func.max(_k.endOffset))
    .where(_k.jobId == _j.id, _k.attemptNo == _j.attemptCount)
    .scalar_subquery()
)
_FEEDS = select(_j.id, _j.lifecycleStatus, _j.attemptCount, _END.label("end")).where(
    _j.id.in_(_IDS)
)
_EARLIER = (
    select(_k.jobId, _k.attemptNo, _k.startOffset, _k.text, _j.errorCode)
    .join(sql.jobs, _j.id == _k.jobId)
    .where(_k.jobId.in_(_IDS), _k.attemptNo < _j.attemptCount)
    .order_by(_k.jobId, _k.attemptNo, _k.startOffset)
)
_ENDED = (
    select(_k.jobId)
    .distinct()
    .join(sql.jobs, _j.id == _k.jobId)
    .where(
        _j.lifecycleStatus.in_([status.value for status in TERMINAL]),
        _j.finishedAt <= db_now(-bindparam("b_retention_ms", type_=Integer)),
    )
    .limit(bindparam("b_limit"))
)
_DELETE = delete(_chunks).where(_k.jobId.in_(_IDS))


class SqlOutputStore(OutputStore):
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def add_chunks(self, chunks: Sequence[ChunkRow]) -> None:
        rows = [
            {
                "jobId": c.job_id,
                "attemptNo": c.attempt_no,
                "startOffset": c.offset,
                "endOffset": c.end,
                "text": c.text,
            }
            for c in chunks
        ]
        await insert_rows(self._conn, _chunks, rows, ignore_duplicates=True, later=True)

    async def stored_text(
        self, attempts: Collection[tuple[str, int]]
    ) -> dict[tuple[str, int], Stored]:
        if not attempts:
            return {}
        found = await self._conn.execute(_STORED, {"b_ids": sorted({j for j, _ in attempts})})
        stored = {(r[0], r[1]): Stored(int(r[2]), int(r[3]), int(r[4])) for r in found}
        return {key: stored.get(key, Stored()) for key in attempts}

    async def chunks_from(self, job_id: str, attempt_no: int, offset: int) -> list[ChunkRow]:
        rows = await self._conn.execute(
            _FROM, {"b_id": job_id, "b_attempt": attempt_no, "b_offset": offset}
        )
        return [ChunkRow(job_id, attempt_no, int(r.startOffset), r.text) for r in rows]

    async def feed_states(self, job_ids: Sequence[str]) -> dict[str, FeedState]:
        rows = await self._conn.execute(_FEEDS, {"b_ids": list(job_ids)})
        return {
            r.id: FeedState(r.lifecycleStatus, int(r.attemptCount), int(r.end or 0)) for r in rows
        }

    async def earlier_text(self, job_ids: Collection[str]) -> dict[str, tuple[str | None, str]]:
        if not job_ids:
            return {}
        latest: dict[str, list[ChunkRow]] = {}
        errors: dict[str, str | None] = {}
        for r in await self._conn.execute(_EARLIER, {"b_ids": sorted(job_ids)}):
            chunks = latest.setdefault(r.jobId, [])
            if chunks and chunks[0].attempt_no != r.attemptNo:
                chunks.clear()  # ordered by attempt: a later attempt replaces an earlier one
            chunks.append(ChunkRow(r.jobId, int(r.attemptNo), int(r.startOffset), r.text))
            errors[r.jobId] = r.errorCode
        return {job_id: (errors[job_id], written_text(c)) for job_id, c in latest.items()}

    async def prune(self, retention_ms: int, *, limit: int = 500) -> int:
        found = await self._conn.execute(_ENDED, {"b_retention_ms": retention_ms, "b_limit": limit})
        ended = [r[0] for r in found]
        if ended:
            await self._conn.execute(_DELETE, {"b_ids": ended})
        return len(ended)

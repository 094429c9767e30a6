"""Reading what a lease hands to a runtime: the job's execution fields and its input."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, select
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.db.models import AiJob, AiJobSnapshot
from scheduler_service.lifecycle.repository import LeaseGrant

_jobs = cast(Table, AiJob.__table__)
_snapshots = cast(Table, AiJobSnapshot.__table__)


@dataclass(frozen=True, slots=True)
class LeasePayload:
    job_id: str
    job_type: str
    attempt_no: int
    lock_until: datetime
    timeout_ms: int
    snapshot: dict[str, Any]
    params: dict[str, Any]
    prompt_key: str
    prompt_version: str
    model_name: str
    credential_mode: str
    credential_id: str
    checkpoint: bytes
    output_schema_version: str


async def load_payloads(conn: AsyncConnection, grants: Sequence[LeaseGrant]) -> list[LeasePayload]:
    """The payloads of ``grants``, in their order."""
    if not grants:
        return []
    j, s = _jobs.c, _snapshots.c
    query = (
        select(
            j.id,
            j.jobType,
            j.timeoutMs,
            j.promptKey,
            j.promptVersion,
            j.modelName,
            j.credentialMode,
            j.credentialId,
            j.outputSchemaVersion,
            s.content,
            s.params,
        )
        .select_from(_jobs.outerjoin(_snapshots, s.jobId == j.id))
        .where(j.id.in_([g.job_id for g in grants]))
    )
    rows = {r.id: r for r in await conn.execute(query)}
    return [
        LeasePayload(
            job_id=g.job_id,
            job_type=rows[g.job_id].jobType,
            attempt_no=g.attempt_no,
            lock_until=g.lock_until,
            timeout_ms=rows[g.job_id].timeoutMs,
            snapshot=rows[g.job_id].content or {},
            params=rows[g.job_id].params or {},
            prompt_key=rows[g.job_id].promptKey or "",
            prompt_version=rows[g.job_id].promptVersion or "",
            model_name=rows[g.job_id].modelName,
            credential_mode=rows[g.job_id].credentialMode,
            credential_id=rows[g.job_id].credentialId or "",
            checkpoint=g.checkpoint or b"",
            output_schema_version=rows[g.job_id].outputSchemaVersion or "",
        )
        for g in grants
    ]

"""Recording model usage (AiUsageLog) in the caller's transaction."""

from __future__ import annotations

from typing import cast

from sqlalchemy import Table, insert
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.db.clock import db_now
from scheduler_service.db.models import AiUsageLog
from scheduler_service.ids import new_id
from scheduler_service.lifecycle.records import JobRecord, Usage

_usage = cast(Table, AiUsageLog.__table__)
_INSERT_USAGE = insert(_usage).values(modelProvider="deepseek", createdAt=db_now())


async def record_usage(
    conn: AsyncConnection,
    job: JobRecord,
    attempt_no: int,
    usage: Usage | None,
    error_code: str | None = None,
) -> None:
    """One usage row per reported model call; nothing when no call was made."""
    if usage is None:
        return
    await conn.execute(
        _INSERT_USAGE,
        {
            "id": new_id(),
            "jobId": job.id,
            "userId": job.userId,
            "attemptNo": attempt_no,
            "jobType": job.jobType,
            "credentialMode": job.credentialMode,
            "model": usage.model_name[:64],
            "promptKey": job.promptKey,
            "promptVersion": job.promptVersion,
            "promptTokens": usage.prompt_tokens,
            "completionTokens": usage.completion_tokens,
            "totalTokens": usage.prompt_tokens + usage.completion_tokens,
            "costMicros": usage.cost_micros,
            "latencyMs": usage.latency_ms,
            "errorCode": error_code,
        },
    )

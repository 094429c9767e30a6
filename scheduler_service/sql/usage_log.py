"""Recording model usage (AiUsageLog) in the caller's transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.core.ids import new_id
from scheduler_service.core.job_definitions import USER_KEY_MODE
from scheduler_service.core.records import JobRecord
from scheduler_service.core.usage import Usage, UsageEntry
from scheduler_service.sql.db.models import AiUsageLog
from scheduler_service.sql.db.multirow import insert_rows
from scheduler_service.sql.spend_statements import record_spend

_usage = cast(Table, AiUsageLog.__table__)


async def record_usage(
    conn: AsyncConnection,
    job: JobRecord,
    attempt_no: int,
    usage: Usage | None,
    error_code: str | None = None,
) -> None:
    """One usage row per reported model call; nothing when no call was made."""
    await record_usages(conn, [(job, attempt_no, usage, error_code)])


async def record_usages(conn: AsyncConnection, entries: Sequence[UsageEntry]) -> None:
    """The usage rows of several calls in one multi-row insert, and what they cost added to
    their users' and model keys' spend of today (budgets read that, not the ledger)."""
    rows = [_row(job, attempt, usage, code) for job, attempt, usage, code in entries if usage]
    if rows:
        # One statement, sent with the transaction's next (the driver's executemany would
        # send a statement per row).
        await insert_rows(conn, _usage, rows, later=True)
    spent = [(job, usage) for job, _, usage, _ in entries if usage is not None]
    if spent:
        await record_spend(conn, spent, USER_KEY_MODE)


def _row(job: JobRecord, attempt_no: int, usage: Usage, error_code: str | None) -> dict[str, Any]:
    return {
        "id": new_id(),
        "jobId": job.id,
        "userId": job.userId,
        "attemptNo": attempt_no,
        "jobType": job.jobType,
        "credentialMode": job.credentialMode,
        "modelProvider": job.modelProvider[:32],
        "model": (usage.model_name or job.modelName)[:64],
        "promptKey": job.promptKey,
        "promptVersion": job.promptVersion,
        "promptTokens": usage.prompt_tokens,
        "cachedPromptTokens": usage.cached_prompt_tokens,
        "reasoningTokens": usage.reasoning_tokens,
        "completionTokens": usage.completion_tokens,
        "totalTokens": usage.prompt_tokens + usage.completion_tokens,
        "costMicros": usage.cost_micros,
        "latencyMs": usage.latency_ms,
        "firstTokenMs": usage.first_token_ms,
        "errorCode": error_code,
        "atPeak": usage.at_peak,
        "peakCostMicros": usage.peak_cost_micros,
        "runtimeInstanceId": job.lockedBy,
        "modelTier": job.modelTier,
    }

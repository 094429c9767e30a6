"""One job's timeline for operators (AdminService.GetJobTimeline): its outbox events and each
attempt's recorded model usage, oldest first, read through the tables' job indexes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, select

from scheduler_service.sql.db.models import AiUsageLog, OutboxEvent
from scheduler_service.sql.uow import SqlTransaction, SqlUnitOfWork

__all__ = ["Timeline", "TimelineAttempt", "TimelineEvent", "job_timeline"]

_outbox = cast(Table, OutboxEvent.__table__)
_usage = cast(Table, AiUsageLog.__table__)


@dataclass(frozen=True, slots=True)
class TimelineEvent:
    event_type: str
    occurred_at: datetime
    payload_json: str


@dataclass(frozen=True, slots=True)
class TimelineAttempt:
    attempt_no: int
    runtime_instance_id: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_micros: int
    latency_ms: int
    error_code: str
    recorded_at: datetime
    cached_prompt_tokens: int = 0
    reasoning_tokens: int = 0
    #: The route tier it ran on (empty for rows recorded before tiers).
    model_tier: str = ""


@dataclass(frozen=True, slots=True)
class Timeline:
    events: list[TimelineEvent]
    attempts: list[TimelineAttempt]
    snapshot_json: str = "{}"
    params_json: str = "{}"


_EVENTS = (
    select(_outbox.c.eventType, _outbox.c.createdAt, _outbox.c.payload)
    .where(_outbox.c.aggregateType == "AiJob", _outbox.c.aggregateId == bindparam("b_id"))
    .order_by(_outbox.c.id)
)
_ATTEMPTS = (
    select(_usage)
    .where(_usage.c.jobId == bindparam("b_id"))
    .order_by(_usage.c.attemptNo, _usage.c.createdAt)
)


async def job_timeline(uow: SqlUnitOfWork, job_id: str) -> Timeline:
    return await uow.read(lambda tx: _timeline(tx, job_id))


async def _timeline(tx: SqlTransaction, job_id: str) -> Timeline:
    events = [
        TimelineEvent(str(kind), at, _json(payload))
        for kind, at, payload in await tx.conn.execute(_EVENTS, {"b_id": job_id})
    ]
    attempts = [
        TimelineAttempt(
            attempt_no=int(r.attemptNo),
            runtime_instance_id=r.runtimeInstanceId or "",
            model=r.model or "",
            prompt_tokens=int(r.promptTokens),
            completion_tokens=int(r.completionTokens),
            cost_micros=int(r.costMicros),
            latency_ms=int(r.latencyMs),
            error_code=r.errorCode or "",
            recorded_at=r.createdAt,
            cached_prompt_tokens=int(r.cachedPromptTokens),
            reasoning_tokens=int(r.reasoningTokens),
            model_tier=r.modelTier or "",
        )
        for r in await tx.conn.execute(_ATTEMPTS, {"b_id": job_id})
    ]
    snapshot, params = await tx.reads.snapshot(job_id)
    return Timeline(events, attempts, _json(snapshot), _json(params))


def _json(payload: Any) -> str:
    if isinstance(payload, str):
        return payload
    return json.dumps(payload or {}, sort_keys=True, separators=(",", ":"))

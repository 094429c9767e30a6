"""The model keys' flow state on SQL (``AiModelKey``): congestion, pauses, answers, limits."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.core.model_keys import (
    Answered,
    FlowPolicy,
    KeyState,
    KeyStats,
    ModelKey,
    ModelKeyLimits,
    after_answers,
    after_congestion,
    paused,
    slowed,
    spent,
    trimmed,
)
from scheduler_service.core.records import JobRecord
from scheduler_service.core.usage import Usage
from scheduler_service.ports import ModelKeyStore
from scheduler_service.sql import model_key_statements as flow_sql

__all__ = ["SqlModelKeyStore"]


class SqlModelKeyStore(ModelKeyStore):
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def congested(self, job: JobRecord, flow: FlowPolicy, retry_after_ms: int | None) -> None:
        key = flow.key(job.modelProvider, job.modelName, job.credentialMode)
        now, state = await flow_sql.congested(self._conn, key, flow)
        running = await flow_sql.running_by_key(self._conn, flow.user_key_mode, {key})
        pause = None if retry_after_ms is None else timedelta(milliseconds=retry_after_ms)
        state = after_congestion(state, now, pause, running.get(key, 0))
        await flow_sql.save_states(
            self._conn, {key: state}, {key: 1} if retry_after_ms is not None else None
        )

    async def paused(self, job: JobRecord, flow: FlowPolicy, pause_ms: int) -> None:
        key = flow.key(job.modelProvider, job.modelName, job.credentialMode)
        now, state = await flow_sql.congested(self._conn, key, flow)
        await flow_sql.save_states(
            self._conn, {key: paused(state, now, timedelta(milliseconds=pause_ms))}
        )

    async def answered(
        self, answers: Sequence[tuple[JobRecord, Usage | None]], flow: FlowPolicy
    ) -> None:
        """Calls that answered: their keys' windows grow, or shrink when a first token came
        slower than the key's baseline allows (core/model_keys.py ``after_answers``)."""
        calls: dict[ModelKey, list[Answered]] = {}
        for job, usage in answers:
            key = flow.key(job.modelProvider, job.modelName, job.credentialMode)
            first_token = usage.first_token_ms if usage is not None else None
            calls.setdefault(key, []).append(Answered(job.lockedAt, first_token))
        if any(c.first_token_ms is not None for batch in calls.values() for c in batch):
            now, states = await flow_sql.lock_keys(self._conn, flow, calls)
        else:
            # Nothing to judge: only windows still growing change (no lock on a settled key).
            now, states = await flow_sql.congested_keys(self._conn, flow, calls)
        changed: dict[ModelKey, KeyState] = {}
        for key, state in states.items():
            assert now is not None  # read with the states
            running = await self._running_before_decrease(key, state, calls[key], now, flow)
            after = after_answers(
                state, calls[key], now, tolerance=flow.latency_tolerance, running=running
            )
            if after != state:
                changed[key] = after
        if changed:
            await flow_sql.save_states(self._conn, changed)

    async def _running_before_decrease(
        self,
        key: ModelKey,
        state: KeyState,
        calls: Sequence[Answered],
        now: datetime,
        flow: FlowPolicy,
    ) -> int:
        """What runs on a key about to be halved with neither a window nor a limit to halve."""
        if state.effective is not None or (
            state.limits.max_concurrency and not state.account_limited
        ):
            return 0
        if not slowed(state, calls, now, flow.latency_tolerance):
            return 0
        running = await flow_sql.running_by_key(self._conn, flow.user_key_mode, {key})
        return running.get(key, 0)

    async def put_limits(self, key: ModelKey, limits: ModelKeyLimits) -> None:
        await flow_sql.put_limits(self._conn, key, limits)

    async def stats(self, flow: FlowPolicy) -> list[KeyStats]:
        now, rows = await flow_sql.read_keys(self._conn)
        keys = {flow_sql.key_of(row) for row in rows}
        running = await flow_sql.running_by_key(self._conn, flow.user_key_mode, keys)
        found = []
        for row in rows:
            key, set_limits = flow_sql.key_of(row), flow_sql.limits_of(row)
            state = flow_sql.state_of(row, flow, now)
            paused_until = row.pausedUntil if row.pausedUntil and row.pausedUntil > now else None
            found.append(
                KeyStats(
                    key,
                    set_limits,
                    running.get(key, 0),
                    state.concurrency(),
                    paused_until,
                    int(row.rateLimitedTotal),
                    spent(trimmed(state.rate_limited, now)),
                    state.cost_today,
                )
            )
        return found

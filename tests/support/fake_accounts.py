"""The in-memory stores beside the jobs': gates, model keys, spend and budgets, results, outbox.

Budgets and model limits are real here, as on SQL: a budget refuses creates and holds back
claims, a 429 pauses its model key and halves its concurrency, and the claim admits jobs through
the same pure rules (``core/budgets.py``, ``core/model_keys.py``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from scheduler_service.core.budgets import Budget, Spend, Standing
from scheduler_service.core.events import NewEvent
from scheduler_service.core.fairness import Floor, places
from scheduler_service.core.model_keys import (
    Answered,
    FlowPolicy,
    KeyState,
    KeyStats,
    ModelKey,
    ModelKeyLimits,
    admit,
    after_answers,
    after_congestion,
    paused,
    slowed,
    spent,
    trimmed,
)
from scheduler_service.core.records import ArtifactRow, JobRecord, NewJob
from scheduler_service.core.usage import Usage, UsageEntry, UsageLine
from scheduler_service.ports import (
    GateStore,
    ModelKeyStore,
    OutboxStore,
    Projection,
    ResultStore,
    SpendStore,
)
from tests.support.fake_state import QUEUED, RUNNING, FakeEvent, FakeTables, Row

__all__ = [
    "FakeGateStore",
    "FakeModelKeyStore",
    "FakeOutboxStore",
    "FakeResultStore",
    "FakeSpendStore",
]


class FakeGateStore(FakeTables, GateStore):
    async def lock_user_gates(self, user_ids: Collection[str]) -> dict[str, tuple[int, int]]:
        midnight = self.now.replace(hour=0, minute=0, second=0, microsecond=0)
        counts = {}
        for user in sorted(set(user_ids)):
            mine = self.user_rows(user)
            active = sum(r["lifecycleStatus"] in (QUEUED, RUNNING) for r in mine)
            counts[user] = (active, sum(r["createdAt"] >= midnight for r in mine))
        return counts

    async def fair_places(self, jobs: Sequence[NewJob]) -> list[int]:
        return [self._place(job.user_id, job.priority) for job in jobs]

    def _place(self, user: str, priority: int) -> int:
        at_priority = [r for r in self.state.jobs.values() if r["priority"] == priority]
        queued = [r["fairSeq"] for r in at_priority if r["lifecycleStatus"] == QUEUED]
        running = [r["fairSeq"] for r in at_priority if r["lifecycleStatus"] == RUNNING]
        floor = Floor(min(queued, default=None), max(running, default=None))
        (place,), latest = places([(user, priority)], self.state.fair_lasts, {priority: floor})
        self.state.fair_lasts.update(latest)
        return place

    async def prune_user_gates(self, idle_ms: int, *, limit: int = 500) -> int:
        return 0  # the fake counts without gate rows


class FakeModelKeyStore(FakeTables, ModelKeyStore):
    def _key(self, row: Row | JobRecord, flow: FlowPolicy) -> ModelKey:
        if isinstance(row, JobRecord):
            return flow.key(row.modelProvider, row.modelName, row.credentialMode)
        return flow.key(row["modelProvider"], row["modelName"], row["credentialMode"])

    def _state(self, key: ModelKey, flow: FlowPolicy) -> KeyState:
        set_limits = self.state.key_limits.get(key, ModelKeyLimits())
        limits, account = flow.limits(key, set_limits), flow.account_limited(key, set_limits)
        stored = self.state.keys.get(key)
        if stored is None:
            return KeyState(limits, effective=flow.fresh(), account_limited=account)
        return replace(stored, limits=limits, account_limited=account)

    def _running(self, flow: FlowPolicy) -> Counter[ModelKey]:
        return Counter(
            self._key(r, flow) for r in self.state.jobs.values() if r["lifecycleStatus"] == RUNNING
        )

    def admit_claim(self, rows: Sequence[Row], flow: FlowPolicy, wanted: int) -> list[str]:
        """The claim's model-key step: the rows (best first) whose keys have budget now."""
        keyed = [(r["id"], self._key(r, flow), int(r["tokenEstimate"] or 0)) for r in rows]
        keys = {key for _, key, _ in keyed}
        states = {
            key: self._state(key, flow)
            for key in keys
            if flow.keeps_rows or key in self.state.keys or key in self.state.key_limits
        }
        ids, changed = admit(keyed, states, self._running(flow), self.now, wanted)
        self.state.keys.update(changed)
        return ids

    async def congested(self, job: JobRecord, flow: FlowPolicy, retry_after_ms: int | None) -> None:
        key = self._key(job, flow)
        pause = None if retry_after_ms is None else timedelta(milliseconds=retry_after_ms)
        running = self._running(flow)[key]
        self.state.keys[key] = after_congestion(self._state(key, flow), self.now, pause, running)
        if retry_after_ms is not None:
            self.state.rate_limited[key] = self.state.rate_limited.get(key, 0) + 1

    async def paused(self, job: JobRecord, flow: FlowPolicy, pause_ms: int) -> None:
        key = self._key(job, flow)
        pause = timedelta(milliseconds=pause_ms)
        self.state.keys[key] = paused(self._state(key, flow), self.now, pause)

    async def answered(
        self, answers: Sequence[tuple[JobRecord, Usage | None]], flow: FlowPolicy
    ) -> None:
        calls: dict[ModelKey, list[Answered]] = {}
        for job, usage in answers:
            first_token = usage.first_token_ms if usage is not None else None
            calls.setdefault(self._key(job, flow), []).append(Answered(job.lockedAt, first_token))
        for key, batch in calls.items():
            if key not in self.state.keys:
                continue  # a key with no state row: nothing to grow back
            state = self._state(key, flow)
            unbounded = state.effective is None and not state.limits.max_concurrency
            running = (
                self._running(flow)[key]
                if unbounded and slowed(state, batch, self.now, flow.latency_tolerance)
                else 0
            )
            self.state.keys[key] = after_answers(
                state, batch, self.now, tolerance=flow.latency_tolerance, running=running
            )

    async def put_limits(self, key: ModelKey, limits: ModelKeyLimits) -> None:
        self.state.key_limits[key] = limits

    async def stats(self, flow: FlowPolicy) -> list[KeyStats]:
        running = self._running(flow)
        found = []
        for key in sorted(set(self.state.keys) | set(self.state.key_limits)):
            state = self._state(key, flow)
            until = state.paused_until
            found.append(
                KeyStats(
                    key,
                    self.state.key_limits.get(key, ModelKeyLimits()),
                    running[key],
                    state.concurrency(),
                    until if until is not None and until > self.now else None,
                    self.state.rate_limited.get(key, 0),
                    spent(trimmed(state.rate_limited, self.now)),
                    state.cost_today,
                )
            )
        return found


class FakeSpendStore(FakeTables, SpendStore):
    async def record_usages(self, entries: Sequence[UsageEntry]) -> None:
        for job, attempt_no, usage, error_code in entries:
            if usage is None:
                continue
            self.state.usage.append((job.id, attempt_no, usage, error_code))
            day = (job.userId, self.day())
            was = self.state.spend.get(day, Spend())
            self.state.spend[day] = Spend(
                was.tokens + usage.prompt_tokens + usage.completion_tokens,
                was.cost_micros + usage.cost_micros,
            )

    def _budget(self, user_id: str, budget: Budget) -> Budget:
        return budget.with_override(*self.state.budgets.get(user_id, (None, None)))

    async def budget_standings(
        self, user_ids: Collection[str], budget: Budget, reserving: Collection[str]
    ) -> dict[str, Standing]:
        standings = {}
        for user in user_ids:
            own = self._budget(user, budget)
            if not own.any:
                continue
            reserved = sum(
                int(r["tokenEstimate"] or 0)
                for r in self.user_rows(user)
                if r["lifecycleStatus"] in reserving
            )
            standings[user] = Standing(own, await self.spend_today(user), reserved)
        return standings

    async def over_budget(self, user_ids: Collection[str], budget: Budget) -> set[str]:
        return {
            user
            for user in user_ids
            if self._budget(user, budget).exceeded_by(await self.spend_today(user))
        }

    async def over_budget_queued(
        self, budget: Budget, *, limit: int = 100
    ) -> list[tuple[str, str]]:
        users = {r["userId"] for r in self.state.jobs.values() if r["lifecycleStatus"] == QUEUED}
        over = await self.over_budget(users, budget)
        return [
            (r["id"], r["jobType"])
            for r in self.state.jobs.values()
            if r["lifecycleStatus"] == QUEUED and r["userId"] in over
        ][:limit]

    async def put_budget(self, user_id: str, tokens: int, cost_micros: int) -> None:
        self.state.budgets[user_id] = (tokens, cost_micros)

    async def budget_of(self, user_id: str) -> tuple[int | None, int | None]:
        return self.state.budgets.get(user_id, (None, None))

    async def spend_today(self, user_id: str) -> Spend:
        return self.state.spend.get((user_id, self.day()), Spend())

    async def today(self) -> datetime:
        return self.now.replace(hour=0, minute=0, second=0, microsecond=0)

    async def usage_report(
        self, user_id: str, start: datetime, end: datetime, user_key_mode: str
    ) -> tuple[UsageLine, dict[ModelKey, UsageLine]]:
        # The fake's ledger has no timestamps: every call counts as today's.
        if not start <= await self.today() < end:
            return UsageLine(), {}
        mine = [
            entry for entry in self.state.usage if self.state.jobs[entry[0]]["userId"] == user_id
        ]
        line = UsageLine(
            sum(u.prompt_tokens for _, _, u, _ in mine),
            sum(u.cached_prompt_tokens for _, _, u, _ in mine),
            sum(u.completion_tokens for _, _, u, _ in mine),
            sum(u.cost_micros for _, _, u, _ in mine),
            len({job_id for job_id, _, _, _ in mine}),
            len(mine),
        )
        return line, {}


class FakeResultStore(FakeTables, ResultStore):
    async def project_many(self, items: Sequence[Projection]) -> None:
        for projector, job, attempt_no, _output in items:
            self.state.artifacts[job.id] = [ArtifactRow(projector, f"{job.id}:{attempt_no}")]

    async def artifacts(self, job_id: str) -> list[ArtifactRow]:
        return list(self.state.artifacts.get(job_id, []))


class FakeOutboxStore(FakeTables, OutboxStore):
    async def add(self, events: Sequence[NewEvent]) -> None:
        self.state.events += [
            FakeEvent(e.event_type, e.job_id, e.job_type, e.payload) for e in events
        ]

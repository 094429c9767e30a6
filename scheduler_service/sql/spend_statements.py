"""Budgets and spend on SQL: what each user and each model key spent per UTC day (written in the
transaction that writes the ledger), operators' budgets, and the usage report read from the
ledger itself."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Table,
    and_,
    bindparam,
    case,
    func,
    literal,
    or_,
    select,
    union,
    update,
)
from sqlalchemy.dialects.mysql import insert as mysql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.core.budgets import Budget, Spend, Standing
from scheduler_service.core.model_keys import ModelKey, key_model, scope_of
from scheduler_service.core.records import JobRecord
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.core.usage import Usage, UsageLine
from scheduler_service.sql.db.clock import db_now, db_today
from scheduler_service.sql.db.driver import write_later
from scheduler_service.sql.db.models import AiJob, AiModelKey, AiUsageLog
from scheduler_service.sql.db.multirow import insert_rows
from scheduler_service.sql.db.spend_models import AiUserBudget, AiUserSpend
from scheduler_service.sql.job_statements import engine_owned

__all__ = [
    "budget_standings",
    "over_budget",
    "over_budget_queued",
    "put_budget",
    "read_budget",
    "record_spend",
    "spend_today",
    "usage_report",
]

_spend = cast(Table, AiUserSpend.__table__)
_budget = cast(Table, AiUserBudget.__table__)
_keys = cast(Table, AiModelKey.__table__)
_usage = cast(Table, AiUsageLog.__table__)
_jobs = cast(Table, AiJob.__table__)

#: One instance, so that the multi-row template compiled with it is cached.
_TODAY = db_today()

_KEY_COST = (
    update(_keys)
    .where(
        _keys.c.provider == bindparam("b_provider"),
        _keys.c.model == bindparam("b_model"),
        _keys.c.credentialScope == bindparam("b_scope"),
    )
    .values(
        # One day at a time: the first cost of a new UTC day starts the count again.
        costToday=case(
            (_keys.c.costDay == db_today(), _keys.c.costToday + bindparam("v_cost")),
            else_=bindparam("v_cost"),
        ),
        costDay=db_today(),
    )
)


async def record_spend(
    conn: AsyncConnection, entries: Sequence[tuple[JobRecord, Usage]], user_key_mode: str
) -> None:
    """Add the calls' tokens and cost to their users' (and their model keys') spend of today, in
    the transaction that writes their ledger rows (users in one order, so that two writers
    cannot deadlock)."""
    users: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    keys: dict[ModelKey, int] = defaultdict(int)
    for job, usage in entries:
        spent = users[job.userId]
        spent[0] += usage.prompt_tokens + usage.completion_tokens
        spent[1] += usage.cost_micros
        key = ModelKey(
            job.modelProvider,
            key_model(job.modelName),
            scope_of(job.credentialMode, user_key_mode),
        )
        keys[key] += usage.cost_micros
    await insert_rows(
        conn,
        _spend,
        [
            {"userId": user, "tokens": tokens, "costMicros": cost}
            for user, (tokens, cost) in sorted(users.items())
        ],
        stamped=(),
        fixed={"day": _TODAY},
        accumulate=("tokens", "costMicros"),
        later=True,
    )
    for key, cost in sorted(keys.items()):
        if cost:
            await write_later(
                conn,
                _KEY_COST,
                {
                    "b_provider": key.provider,
                    "b_model": key.model,
                    "b_scope": key.scope,
                    "v_cost": cost,
                },
            )


def _over(budget: Budget) -> ColumnElement[bool]:
    """Today's spend row (joined with the user's own budget) has reached the budget."""
    tokens = func.coalesce(_budget.c.dailyTokens, literal(budget.daily_tokens))
    cost = func.coalesce(_budget.c.dailyCostMicros, literal(budget.daily_cost_micros))
    return or_(
        and_(tokens > 0, _spend.c.tokens >= tokens),
        and_(cost > 0, _spend.c.costMicros >= cost),
    )


def _spent_today() -> Any:
    return _spend.outerjoin(_budget, _budget.c.userId == _spend.c.userId)


async def over_budget(conn: AsyncConnection, users: Collection[str], budget: Budget) -> set[str]:
    """Those of ``users`` whose spend today reached their budget (one read, by primary key)."""
    if not users:
        return set()
    query = (
        select(_spend.c.userId)
        .select_from(_spent_today())
        .where(_spend.c.day == db_today(), _spend.c.userId.in_(sorted(users)), _over(budget))
    )
    return set((await conn.execute(query)).scalars())


async def over_budget_queued(
    conn: AsyncConnection, budget: Budget, *, limit: int = 100
) -> list[tuple[str, str]]:
    """(job id, job type) of queued jobs whose users are over budget today.

    The users first (today's spend rows: one per user seen today), then their queued jobs: one
    join read from the queued side would visit every queued job at every sweep."""
    over = (
        select(_spend.c.userId)
        .select_from(_spent_today())
        .where(_spend.c.day == db_today(), _over(budget))
    )
    users = sorted((await conn.execute(over)).scalars())
    if not users:
        return []
    query = (
        select(_jobs.c.id, _jobs.c.jobType)
        .where(
            _jobs.c.userId.in_(users),
            _jobs.c.lifecycleStatus == LifecycleStatus.QUEUED.value,
            engine_owned(),  # The legacy system's rows are its own: never failed for a budget
        )
        .limit(limit)
    )
    return [(row.id, row.jobType) for row in await conn.execute(query)]


_USERS: BindParameter[list[str]] = bindparam("b_users", expanding=True)
#: Users with a budget row or a spend row today (prebuilt: a create reads it every time).
_KNOWN = union(
    select(_budget.c.userId).where(_budget.c.userId.in_(_USERS)),
    select(_spend.c.userId).where(_spend.c.userId.in_(_USERS), _spend.c.day == db_today()),
).subquery()
_STANDINGS = (
    select(
        _KNOWN.c.userId,
        _budget.c.dailyTokens,
        _budget.c.dailyCostMicros,
        _spend.c.tokens,
        _spend.c.costMicros,
    )
    .select_from(_KNOWN)
    .outerjoin(_budget, _budget.c.userId == _KNOWN.c.userId)
    .outerjoin(_spend, and_(_spend.c.userId == _KNOWN.c.userId, _spend.c.day == db_today()))
)
_RESERVED = (
    select(_jobs.c.userId, func.sum(_jobs.c.tokenEstimate))
    .where(
        _jobs.c.userId.in_(_USERS),
        _jobs.c.lifecycleStatus.in_(bindparam("b_states", expanding=True)),
    )
    .group_by(_jobs.c.userId)
)


async def budget_standings(
    conn: AsyncConnection, users: Collection[str], budget: Budget, reserving: Collection[str]
) -> dict[str, Standing]:
    """Each of ``users``'s budget today (their own or ``budget``), spend, and the token
    estimates of their jobs in the ``reserving`` states. Only users with a budget are in the
    answer; the estimates are read only for users with a token budget."""
    if not users:
        return {}
    ids = sorted(users)
    rows = await conn.execute(_STANDINGS, {"b_users": ids})
    standings = {user: Standing(budget) for user in ids}
    for row in rows:
        standings[row.userId] = Standing(
            budget.with_override(row.dailyTokens, row.dailyCostMicros),
            Spend(int(row.tokens or 0), int(row.costMicros or 0)),
        )
    standings = {user: s for user, s in standings.items() if s.budget.any}
    metered = sorted(user for user, s in standings.items() if s.budget.daily_tokens)
    if metered and reserving:
        reserved = await conn.execute(
            _RESERVED, {"b_users": metered, "b_states": sorted(reserving)}
        )
        for user, tokens in reserved:
            standings[user] = Standing(
                standings[user].budget, standings[user].spent, int(tokens or 0)
            )
    return standings


async def put_budget(conn: AsyncConnection, user_id: str, tokens: int, cost_micros: int) -> None:
    values = {
        "userId": user_id,
        "dailyTokens": tokens,
        "dailyCostMicros": cost_micros,
        "updatedAt": db_now(),
    }
    if conn.dialect.name == "sqlite":
        lite = sqlite_insert(_budget).values(values)
        statement: Any = lite.on_conflict_do_update(
            index_elements=[_budget.c.userId],
            set_={"dailyTokens": tokens, "dailyCostMicros": cost_micros, "updatedAt": db_now()},
        )
    else:
        statement = (
            mysql_insert(_budget)
            .values(values)
            .on_duplicate_key_update(
                dailyTokens=tokens, dailyCostMicros=cost_micros, updatedAt=db_now()
            )
        )
    await conn.execute(statement)


async def read_budget(conn: AsyncConnection, user_id: str) -> tuple[int | None, int | None]:
    """The user's own budget as set (None: the default), tokens and cost."""
    row = (
        await conn.execute(
            select(_budget.c.dailyTokens, _budget.c.dailyCostMicros).where(
                _budget.c.userId == user_id
            )
        )
    ).first()
    return (None, None) if row is None else (row.dailyTokens, row.dailyCostMicros)


def _totals() -> list[Any]:
    return [
        func.coalesce(func.sum(_usage.c.promptTokens), 0).label("prompt"),
        func.coalesce(func.sum(_usage.c.cachedPromptTokens), 0).label("cached"),
        func.coalesce(func.sum(_usage.c.completionTokens), 0).label("completion"),
        func.coalesce(func.sum(_usage.c.reasoningTokens), 0).label("reasoning"),
        func.coalesce(func.sum(_usage.c.costMicros), 0).label("cost"),
        func.count(func.distinct(_usage.c.jobId)).label("jobs"),
        func.count().label("attempts"),
        func.coalesce(func.sum(case((_usage.c.atPeak, _usage.c.costMicros), else_=0)), 0).label(
            "peak"
        ),
        func.coalesce(
            func.sum(func.coalesce(_usage.c.peakCostMicros, _usage.c.costMicros)), 0
        ).label("at_peak_rate"),
    ]


def _line(row: Any) -> UsageLine:
    cost, peak = int(row.cost), int(row.peak)
    return UsageLine(
        int(row.prompt),
        int(row.cached),
        int(row.completion),
        cost,
        int(row.jobs),
        int(row.attempts),
        peak_cost_micros=peak,
        off_peak_cost_micros=cost - peak,
        saved_cost_micros=int(row.at_peak_rate) - cost,
        reasoning_tokens=int(row.reasoning),
    )


async def usage_report(
    conn: AsyncConnection, user_id: str, start: datetime, end: datetime, user_key_mode: str
) -> tuple[UsageLine, dict[ModelKey, UsageLine]]:
    """The user's ledger rows from ``start`` (inclusive) to ``end`` (exclusive): totals, and the
    same per model key (provider, model, whose key paid)."""
    mine = (
        _usage.c.userId == user_id,
        _usage.c.createdAt >= start,
        _usage.c.createdAt < end,
    )
    total = (await conn.execute(select(*_totals()).where(*mine))).one()
    per_key = await conn.execute(
        select(_usage.c.modelProvider, _usage.c.model, _usage.c.credentialMode, *_totals())
        .where(*mine)
        .group_by(_usage.c.modelProvider, _usage.c.model, _usage.c.credentialMode)
    )
    keys: dict[ModelKey, UsageLine] = {}
    for row in per_key:
        key = ModelKey(
            row.modelProvider or "",
            key_model(row.model or ""),
            scope_of(row.credentialMode, user_key_mode),
        )
        keys[key] = _merged(keys.get(key), _line(row))
    return _line(total), keys


def _merged(first: UsageLine | None, second: UsageLine) -> UsageLine:
    if first is None:
        return second
    return UsageLine(
        first.prompt_tokens + second.prompt_tokens,
        first.cached_prompt_tokens + second.cached_prompt_tokens,
        first.completion_tokens + second.completion_tokens,
        first.cost_micros + second.cost_micros,
        first.jobs + second.jobs,
        first.attempts + second.attempts,
        first.peak_cost_micros + second.peak_cost_micros,
        first.off_peak_cost_micros + second.off_peak_cost_micros,
        first.saved_cost_micros + second.saved_cost_micros,
        first.reasoning_tokens + second.reasoning_tokens,
    )


async def spend_today(conn: AsyncConnection, user_id: str) -> Spend:
    row = (
        await conn.execute(
            select(_spend.c.tokens, _spend.c.costMicros).where(
                _spend.c.userId == user_id, _spend.c.day == db_today()
            )
        )
    ).first()
    return Spend() if row is None else Spend(int(row.tokens), int(row.costMicros))

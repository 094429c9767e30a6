"""The multi-runtime claim: lease the best queued jobs to several runtimes in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.core.budgets import Budget, admit_within_budgets
from scheduler_service.core.cheap_hours import OFF_PEAK
from scheduler_service.core.fairness import RunningCaps
from scheduler_service.core.job_definitions import USER_KEY_MODE
from scheduler_service.core.lease_tokens import digest, new_lease_token
from scheduler_service.core.model_keys import (
    FlowPolicy,
    KeyState,
    ModelKey,
    admit,
    within_user_caps,
)
from scheduler_service.core.records import LeaseGrant, NewJob
from scheduler_service.core.routes import ModelTier, Router
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.sql import claim_routes
from scheduler_service.sql import job_queries as queries
from scheduler_service.sql import job_statements as sql
from scheduler_service.sql import model_key_statements as flow_sql
from scheduler_service.sql import spend_statements as billing_sql
from scheduler_service.sql.db.driver import write_later

#: Jobs about to be inserted, with their snapshots and params.
FreshJobs = Sequence[tuple[NewJob, dict[str, Any], dict[str, Any]]]

__all__ = ["claim_batches", "claim_fresh", "deal", "grant_of"]


async def claim_batches(
    conn: AsyncConnection,
    job_types: Sequence[str],
    demands: Sequence[tuple[str, int]],
    *,
    lease_ttl_ms: int,
    platform_key_only: bool = False,
    payload_rows: dict[str, Any] | None = None,
    running_caps: RunningCaps | None = None,
    flow: FlowPolicy | None = None,
    budget: Budget | None = None,
    defer_ms: int = 0,
    fresh: FreshJobs | None = None,
    router: Router | None = None,
) -> list[list[LeaseGrant]]:
    """Lease available queued jobs of ``job_types`` to several runtimes (with ``fresh``, of
    those jobs about to be inserted: :func:`claim_fresh`).

    ``demands`` are (runtime instance id, how many) pairs; the answer holds each one's grants, in
    the same order. Highest priority first, then users in turn (``fairSeq``), then oldest, dealt
    out one at a time so that scarce
    work spreads over the runtimes. ``FOR UPDATE SKIP LOCKED`` on the dispatch index lets several
    schedulers claim at once without waiting on (or double-leasing) each other's rows; the lock
    write (one for up to HOLDERS_PER_LOCK runtimes) then moves exactly the locked rows to
    running, each runtime's under its own token. One SELECT whatever the number of runtimes,
    so idle streams cost one query per round.

    With a ``flow`` policy, the model keys' states are read first (one statement), under their
    rows' locks when some key has a limit, a window or a pause (``flow_sql.claim_states``).
    With per-user ``running_caps`` or limited keys, the SELECT reads twice as many candidates
    with their users and keys, and those of users at their cap or of keys without budget
    (paused, at their concurrency, out of requests or tokens) stay queued: their rows are
    skipped, not leased.
    With a ``budget``, jobs of users whose spend of today reached their budget are skipped too
    (one read by primary key); the reaper then fails them BUDGET_EXCEEDED.
    While ``defer_ms`` > 0 (a peak window lasts that long), off-peak jobs stay queued unless
    their deadline cannot wait (core/cheap_hours.py).
    With a ``router``, the open circuit breakers and the operators' routes are read first (one
    statement); when a breaker is open or a route is not the definition's model alone, each
    candidate leases on the first tier of its route whose breaker admits a call, and its row
    says which (``modelProvider``, ``modelName``, ``modelTier``); a job no tier admits stays
    queued.
    """
    if fresh is not None:
        return await claim_fresh(
            conn,
            fresh,
            job_types,
            demands,
            lease_ttl_ms=lease_ttl_ms,
            platform_key_only=platform_key_only,
            payload_rows=payload_rows,
            running_caps=running_caps,
            flow=flow,
            budget=budget,
            defer_ms=defer_ms,
            router=router,
        )
    wanted = sum(max(0, want) for _, want in demands)
    if wanted <= 0 or not job_types:
        return [[] for _ in demands]
    caps = running_caps if running_caps is not None and running_caps.active else None
    routed = await claim_routes.routing_of(conn, router)
    now, states = await flow_sql.claim_states(conn, flow) if flow is not None else (None, {})
    if _judged(caps, states, budget, flow) or routed is not None:
        ids = await _filtered_candidates(
            conn,
            job_types,
            wanted,
            platform_key_only=platform_key_only,
            caps=caps,
            flow=flow,
            budget=budget,
            locked=(now, states),
            defer_ms=defer_ms,
            routed=routed,
        )
    else:
        select = sql.SELECT_CLAIMABLE_PLATFORM_KEY if platform_key_only else sql.SELECT_CLAIMABLE
        bound = {"b_types": sorted(job_types), "b_limit": wanted, "b_defer_ms": defer_ms}
        found = await conn.execute(select, bound)
        ids = list(found.scalars())
    shares = deal(ids, [want for _, want in demands])
    if not ids:
        return [[] for _ in demands]
    tokens = await _lock(conn, demands, shares, lease_ttl_ms)
    if payload_rows is None:
        rows = list(await conn.execute(sql.SELECT_GRANTS, {"b_ids": ids}))
    else:
        # The payloads in the same read: the caller hands each lease its input next.
        rows = list(await conn.execute(queries.GRANTS_WITH_PAYLOADS, {"b_ids": ids}))
        payload_rows.update((r.id, r) for r in rows)
    grants = {r.id: grant_of(r, tokens[r.id]) for r in rows}
    return [[grants[job_id] for job_id in share] for share in shares]


#: Most runtimes whose shares one lock statement writes (a CASE branch each).
HOLDERS_PER_LOCK = 8


async def _lock(
    conn: AsyncConnection,
    demands: Sequence[tuple[str, int]],
    shares: Sequence[Sequence[str]],
    lease_ttl_ms: int,
) -> dict[str, str]:
    """Lease each runtime its share of the claimed rows (locked FOR UPDATE by this transaction),
    with one token per runtime: the shares of up to HOLDERS_PER_LOCK runtimes in one statement.
    Returns each leased job's token."""
    dealt = [(holder, share) for (holder, _), share in zip(demands, shares, strict=True) if share]
    tokens: dict[str, str] = {}
    for start in range(0, len(dealt), HOLDERS_PER_LOCK):
        some = dealt[start : start + HOLDERS_PER_LOCK]
        minted = [new_lease_token() for _ in some]
        ids = [job_id for _, share in some for job_id in share]
        bound: dict[str, Any] = {"b_ids": ids, "b_lease_ttl_ms": lease_ttl_ms}
        if len(some) == 1:
            bound |= {"v_lockedBy": some[0][0], "v_leaseTokenHash": digest(minted[0])}
        else:
            for k, ((holder, share), token) in enumerate(zip(some, minted, strict=True)):
                bound |= {
                    f"b_ids{k}": share,
                    f"v_lockedBy{k}": holder,
                    f"v_leaseTokenHash{k}": digest(token),
                }
        for (_, share), token in zip(some, minted, strict=True):
            tokens |= dict.fromkeys(share, token)
        # Sent with the read of the grants that follows; its count is checked then.
        # Rows locked by this transaction cannot change under it: a mismatch is a bug.
        await write_later(
            conn, sql.lock_many(len(some)), bound, expect=len(ids), what="lease of claimed jobs"
        )
    return tokens


@dataclass(frozen=True, slots=True)
class _FreshRow:
    """A job this transaction is about to insert, shaped as the claim's candidate rows and the
    payload rows are (``queries.payload_of``)."""

    id: str
    userId: str
    jobType: str
    modelProvider: str
    modelName: str
    credentialMode: str
    credentialId: str | None
    tokenEstimate: int
    timeoutMs: int
    content: dict[str, Any]
    params: dict[str, Any]
    promptKey: str | None
    promptVersion: str | None
    outputSchemaVersion: str | None
    maxOutputTokens: int
    traceParent: str | None
    reasoningEffort: str
    prefixKey: str | None
    modelTier: str
    modelPinned: bool

    @classmethod
    def of(cls, job: NewJob, snapshot: dict[str, Any], params: dict[str, Any]) -> _FreshRow:
        return cls(
            job.job_id,
            job.user_id,
            job.job_type,
            job.model_provider,
            job.model_name,
            job.credential_mode,
            job.credential_id,
            job.token_estimate,
            job.timeout_ms,
            snapshot,
            params,
            job.prompt_key,
            job.prompt_version,
            job.output_schema_version,
            job.max_output_tokens,
            job.trace_parent,
            job.reasoning_effort,
            job.prefix_key,
            "primary",
            job.model_pinned,
        )


def _may_take_fresh(
    job: NewJob, job_types: Sequence[str], platform_key_only: bool, defer_ms: int
) -> bool:
    """Whether a claim for ``job_types`` could take ``job`` the moment it is written: what the
    claimable SELECT asks of a row that is new (an off-peak job in a peak window is left to
    it: its deadline decides)."""
    return (
        job.job_type in job_types
        and job.prompt_version is not None
        and not (platform_key_only and job.credential_mode == USER_KEY_MODE)
        and not (defer_ms > 0 and job.cost_policy == OFF_PEAK)
    )


async def claim_fresh(
    conn: AsyncConnection,
    fresh: FreshJobs,
    job_types: Sequence[str],
    demands: Sequence[tuple[str, int]],
    *,
    lease_ttl_ms: int,
    platform_key_only: bool = False,
    payload_rows: dict[str, Any] | None = None,
    running_caps: RunningCaps | None = None,
    flow: FlowPolicy | None = None,
    budget: Budget | None = None,
    defer_ms: int = 0,
    router: Router | None = None,
) -> list[list[LeaseGrant]]:
    """Lease jobs of ``fresh``, which this transaction is about to insert, to several runtimes
    (as :func:`claim_batches` does queued ones), before their rows exist: the caller inserts
    the leased ones already running (``SqlJobStore.create_many``), so a job created while a
    runtime waits is leased by the statement that writes it.

    Only when no queued job of ``job_types`` could be claimed and none of them is a type System
    A owns (one statement, which reads the database's clock for the leases' ends): otherwise
    every share is empty, and a claim after the insert takes the queue's best, old or new.
    The users' budgets and caps and the model keys are judged as for queued candidates; while
    a breaker is open or a route reroutes, no fresh job is leased (the claim after the insert
    routes it)."""
    wanted = sum(max(0, want) for _, want in demands)
    rows = [
        _FreshRow.of(job, snapshot, params)
        for job, snapshot, params in fresh
        if _may_take_fresh(job, job_types, platform_key_only, defer_ms)
    ]
    if wanted <= 0 or not rows:
        return [[] for _ in demands]
    bound = {"b_types": sorted(job_types), "b_defer_ms": defer_ms}
    check = (await conn.execute(sql.SELECT_BEFORE_FRESH, bound)).one()
    if check.waiting or check.legacy or await claim_routes.routing_of(conn, router) is not None:
        return [[] for _ in demands]
    caps = running_caps if running_caps is not None and running_caps.active else None
    locked = await flow_sql.claim_states(conn, flow) if flow is not None else (None, {})
    if _judged(caps, locked[1], budget, flow):
        ids = await _admitted(
            conn, rows, wanted, caps=caps, flow=flow, budget=budget, locked=locked
        )
    else:
        ids = [row.id for row in rows[:wanted]]
    lock_until = check.dbNow + timedelta(milliseconds=lease_ttl_ms)
    by_id = {row.id: row for row in rows}
    shares = deal(ids, [want for _, want in demands])
    grants: list[list[LeaseGrant]] = []
    for share in shares:
        # One token per runtime per claim, as for queued jobs.
        token = new_lease_token()
        grants.append([LeaseGrant(job_id, 1, lock_until, 0.0, token) for job_id in share])
    if payload_rows is not None:
        payload_rows.update((job_id, by_id[job_id]) for job_id in ids)
    return grants


async def _filtered_candidates(
    conn: AsyncConnection,
    job_types: Sequence[str],
    wanted: int,
    *,
    platform_key_only: bool,
    caps: RunningCaps | None,
    flow: FlowPolicy | None,
    budget: Budget | None,
    locked: tuple[datetime | None, dict[ModelKey, KeyState]],
    defer_ms: int,
    routed: claim_routes.Routed | None,
) -> list[str]:
    select = (
        sql.SELECT_CLAIMABLE_DETAIL_PLATFORM_KEY
        if platform_key_only
        else sql.SELECT_CLAIMABLE_DETAIL
    )
    bound = {"b_types": sorted(job_types), "b_limit": 2 * wanted, "b_defer_ms": defer_ms}
    found = await conn.execute(select, bound)
    rows: list[Any] = list(found)
    if not rows:
        return []
    moves: dict[str, tuple[int, ModelTier]] = {}
    if routed is not None:
        rows, moves = await claim_routes.on_tiers(conn, rows, routed)
    ids = await _admitted(conn, rows, wanted, caps=caps, flow=flow, budget=budget, locked=locked)
    await claim_routes.move_tiers(conn, ids, moves)
    return ids


async def _admitted(
    conn: AsyncConnection,
    rows: Sequence[Any],
    wanted: int,
    *,
    caps: RunningCaps | None,
    flow: FlowPolicy | None,
    budget: Budget | None,
    locked: tuple[datetime | None, dict[ModelKey, KeyState]],
) -> list[str]:
    """Of the candidate ``rows`` (best first; each with ``id``, ``userId``, ``modelProvider``,
    ``modelName``, ``credentialMode`` and ``tokenEstimate``), the ids of at most ``wanted``
    that their users' budgets and caps and their model keys let run now; the keys' spent
    budgets are written."""
    if budget is not None:
        # Running jobs reserve their estimates: a lease is granted only if its own fits too.
        standings = await billing_sql.budget_standings(
            conn, {row.userId for row in rows}, budget, (LifecycleStatus.RUNNING.value,)
        )
        kept_ids = set(
            admit_within_budgets([(r.id, r.userId, r.tokenEstimate) for r in rows], standings)
        )
        rows = [row for row in rows if row.id in kept_ids]
    if caps is not None:
        users = sorted({row.userId for row in rows})
        running = await conn.execute(sql.SELECT_RUNNING_BY_USER, {"b_users": users})
        kept = set(caps.admit([(r.id, r.userId) for r in rows], dict(running.all()), len(rows)))
        rows = [row for row in rows if row.id in kept]
    if flow is None:
        return [row.id for row in rows[:wanted]]
    keyed = [
        (row.id, flow.key(row.modelProvider, row.modelName, row.credentialMode), row.tokenEstimate)
        for row in rows
    ]
    now, states = locked
    if flow.keeps_rows and any(key not in states for _, key, _ in keyed):
        now, states = await flow_sql.lock_states(conn, flow, {k for _, k, _ in keyed})
    if now is None:  # no key has a row: nothing limits them
        return [job_id for job_id, _, _ in keyed[:wanted]]
    per_user = {k: s.limits.max_concurrency_per_user for k, s in states.items()}
    if any(per_user.values()):
        owners = {row.id: row.userId for row in rows}
        running_users = await flow_sql.running_by_user_and_key(conn, flow, set(owners.values()))
        keyed = within_user_caps(keyed, owners, per_user, running_users)
    limited = {key for key, state in states.items() if state.concurrency()}
    running_keys = (
        await flow_sql.running_by_key(conn, flow.user_key_mode, limited) if limited else {}
    )
    ids, spent = admit(keyed, states, running_keys, now, wanted)
    await flow_sql.save_states(conn, spent)
    return ids


def _judged(
    caps: RunningCaps | None,
    states: dict[ModelKey, KeyState],
    budget: Budget | None,
    flow: FlowPolicy | None,
) -> bool:
    """Whether candidates need judging (their users' caps or budgets, their keys' states), or
    the best of them are simply leased."""
    keeps_rows = flow is not None and flow.keeps_rows
    return caps is not None or bool(states) or budget is not None or keeps_rows


def deal(ids: Sequence[str], wants: Sequence[int]) -> list[list[str]]:
    """Deal ``ids`` (best first) one at a time to takers that still want more."""
    shares: list[list[str]] = [[] for _ in wants]
    queue = iter(ids)
    while True:
        dealt = False
        for index, want in enumerate(wants):
            if len(shares[index]) >= want:
                continue
            job_id = next(queue, None)
            if job_id is None:
                return shares
            shares[index].append(job_id)
            dealt = True
        if not dealt:
            return shares


def grant_of(row: Any, lease_token: str) -> LeaseGrant:
    waited = (row.lockedAt - row.availableAt).total_seconds() if row.availableAt else 0.0
    return LeaseGrant(row.id, row.attemptCount, row.lockUntil, max(0.0, waited), lease_token)

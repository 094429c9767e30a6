"""Budgets and the usage API on real MariaDB over real gRPC: a user's jobs run until
the ledger passes their budget; then CreateJob answers BUDGET_EXCEEDED, their queued jobs are
skipped by dispatch and failed (with their event), and another user is unaffected. GetUserUsage
totals equal the ledger's rows, failed and retried attempts included; calls are priced by the
scheduler's table, cache hits lower."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime
from typing import Any, cast

import grpc
import pytest
from sqlalchemy import Table, func, select, update

from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output
from devtools.harness.tokens import ADMIN_TOKEN, bearer
from scheduler_service.core.job_registry import JobRegistry
from scheduler_service.core.peak_hours import DEEPSEEK_PEAK_HOURS
from scheduler_service.sql.db.models import AiJob, AiUsageLog
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc, types_pb2
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.status_details import error_reason
from tests.support.db_checks import events, job_row
from tests.support.schedulers import RunningScheduler, SchedulerFactory, fast_registry

pytestmark = pytest.mark.mysql

LEDGER = cast(Table, AiUsageLog.__table__)
LEARNING = {"learner": {"id": "l-1"}, "material": {"id": "m-1", "title": "Cells"}}
#: One call's usage: 400 prompt tokens (128 of them cache hits) and 200 completion tokens.
#: Its cost under the default V4 Flash prices, off-peak (0.15 / 0.003 cached / 0.60 per
#: million), and at peak (twice that).
CALL_COST = -(-(272 * 150_000 + 128 * 3_000 + 200 * 600_000) // 1_000_000)
PEAK_CALL_COST = -(-(272 * 300_000 + 128 * 6_000 + 200 * 1_200_000) // 1_000_000)


def _usage() -> types_pb2.Usage:
    return types_pb2.Usage(
        model_name="deepseek-v4-flash",
        prompt_tokens=400,
        cached_prompt_tokens=128,
        completion_tokens=200,
        latency_ms=5,
        cost_micros=1,
    )


def _admin(scheduler: RunningScheduler) -> Any:
    return admin_service_pb2_grpc.AdminServiceStub(scheduler.channel)


async def _succeed(runtime: ClientRuntime, lease: types_pb2.Lease) -> None:
    request = runtime.result_request(lease, echo_output(lease))
    request.usage.CopyFrom(_usage())
    await runtime.stub.SubmitResult(request, metadata=runtime.metadata, timeout=30)


async def _fail(runtime: ClientRuntime, lease: types_pb2.Lease) -> None:
    await runtime.stub.SubmitFailure(
        rt.SubmitFailureRequest(
            job_id=lease.job_id,
            attempt_no=lease.attempt_no,
            runtime_instance_id=runtime.instance_id,
            error_code="VALIDATION_FAILED",
            retryable=True,
            public_error_message="bad answer",
            lease_token=lease.lease_token,
            usage=_usage(),
        ),
        metadata=runtime.metadata,
        timeout=30,
    )


async def _usage_of(scheduler: RunningScheduler, user: str) -> admin_pb.GetUserUsageResponse:
    return cast(
        admin_pb.GetUserUsageResponse,
        await _admin(scheduler).GetUserUsage(
            admin_pb.GetUserUsageRequest(user_id=user),
            metadata=bearer(ADMIN_TOKEN),
            timeout=30,
        ),
    )


async def _ledger(scheduler: RunningScheduler, user: str) -> tuple[int, ...]:
    query = select(
        func.sum(LEDGER.c.promptTokens),
        func.sum(LEDGER.c.cachedPromptTokens),
        func.sum(LEDGER.c.completionTokens),
        func.sum(LEDGER.c.costMicros),
        func.count(func.distinct(LEDGER.c.jobId)),
        func.count(),
    ).where(LEDGER.c.userId == user)
    async with scheduler.app.engine.connect() as conn:
        return tuple(int(v or 0) for v in (await conn.execute(query)).one())


async def test_a_spent_budget_stops_the_user_and_only_the_user(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, reaper_interval_s=3_600)
    spender, other = JobClient(scheduler.channel, "spender"), JobClient(scheduler.channel, "other")
    # Created before the budget is set: three jobs' estimates would not fit beside each other.
    first, second, queued = [(await spender.create()).job_id for _ in range(3)]
    budget = await _admin(scheduler).PutUserBudget(
        admin_pb.PutUserBudgetRequest(user_id="spender", daily_tokens=1_000),
        metadata=bearer(ADMIN_TOKEN),
        timeout=30,
    )
    assert (budget.daily_tokens, budget.daily_cost_micros) == (1_000, 0)
    runtime = ClientRuntime(scheduler.channel, "rt-budget", slots=1)
    await runtime.connect()
    try:
        # The first job fails once (its call still counts), then succeeds: 1,200 tokens.
        lease = await runtime.next_lease()
        assert lease.job_id == first
        await _fail(runtime, lease)
        runtime.credit()
        retried = await runtime.next_lease()
        assert (retried.job_id, retried.attempt_no) in {(first, 2), (second, 1)}
        await _succeed(runtime, retried)
        # Over budget now (1,200 >= 1,000): CreateJob refuses the user, not another one.
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await spender.create()
        assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error_reason(refused.value) == "BUDGET_EXCEEDED"
        theirs = (await other.create()).job_id
        # Dispatch skips the spender's queued jobs: the next lease is the other user's.
        runtime.credit()
        assert (await runtime.next_lease()).job_id == theirs
    finally:
        await runtime.close()
    # The reaper's sweep fails the jobs left queued, each with its event.
    assert await scheduler.app.reaper.fail_over_budget() == 2
    left = {j for j in (first, second) if j != retried.job_id} | {queued}
    for job_id in left:
        row = await job_row(scheduler.app.engine, job_id)
        assert (row["lifecycleStatus"], row["errorCode"]) == ("failed", "BUDGET_EXCEEDED")
        assert row["attemptCount"] == (1 if job_id == first else 0)
        assert await events(scheduler.app.engine, job_id) == ["ai.job.enqueue", "ai.job.failed"]
    report = await _usage_of(scheduler, "spender")
    assert (report.tokens_today, report.daily_tokens_budget) == (1_200, 1_000)
    assert report.cost_today_micros == 2 * CALL_COST


async def test_usage_totals_are_the_ledgers_with_failures_and_retries(
    scheduler: RunningScheduler,
) -> None:
    jobs = JobClient(scheduler.channel, "ledger-user")
    runtime = ClientRuntime(scheduler.channel, "rt-ledger", slots=1)
    created = [(await jobs.create()).job_id for _ in range(2)]
    await runtime.connect()
    try:
        lease = await runtime.next_lease()
        await _fail(runtime, lease)  # retryable: a second attempt follows
        for _ in range(2):
            runtime.credit()
            await _succeed(runtime, await runtime.next_lease())
    finally:
        await runtime.close()
    report = await _usage_of(scheduler, "ledger-user")
    prompt, cached, completion, cost, job_count, attempts = await _ledger(scheduler, "ledger-user")
    assert (attempts, job_count) == (3, 2)
    assert (
        report.prompt_tokens,
        report.cached_prompt_tokens,
        report.completion_tokens,
        report.cost_micros,
        report.jobs,
        report.attempts,
    ) == (prompt, cached, completion, cost, job_count, attempts)
    assert cost == 3 * CALL_COST  # priced by the scheduler's table, not the runtime's 1
    (key,) = report.model_keys
    assert (key.provider, key.model, key.credential_scope) == (
        "deepseek",
        "deepseek-v4-flash",
        "platform",
    )
    assert (key.attempts, key.cost_micros) == (3, cost)
    assert report.from_date == report.to_date and len(report.from_date) == 10
    for job_id in created:
        assert (await job_row(scheduler.app.engine, job_id))["lifecycleStatus"] == "succeeded"


async def test_a_call_that_started_at_peak_is_priced_at_the_peak_rate(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    """Priced by the window the attempt started in (its lease): the test dates each lease by
    hand, a Thursday in DeepSeek's morning window (10:30 Beijing time) and one after it."""
    scheduler = await start_scheduler(mysql_url, peak_hours=DEEPSEEK_PEAK_HOURS)
    jobs = JobClient(scheduler.channel, "peak-user")
    runtime = ClientRuntime(scheduler.channel, "rt-peak", slots=1)
    await jobs.create()
    await jobs.create()
    await runtime.connect()
    try:
        for started in (datetime(2026, 12, 3, 2, 30), datetime(2026, 12, 3, 4, 30)):
            lease = await runtime.next_lease()
            await _leased_at(scheduler, lease.job_id, started)
            await _succeed(runtime, lease)
            runtime.credit()
    finally:
        await runtime.close()
    report = await _usage_of(scheduler, "peak-user")
    assert (report.cost_micros, report.peak_cost_micros, report.off_peak_cost_micros) == (
        PEAK_CALL_COST + CALL_COST,
        PEAK_CALL_COST,
        CALL_COST,
    )
    # What the off-peak call saved against the peak rate; the peak call saved nothing.
    assert report.saved_cost_micros == PEAK_CALL_COST - CALL_COST


async def _leased_at(scheduler: RunningScheduler, job_id: str, when: datetime) -> None:
    """A test fixture, not a lifecycle write: the lease's start moved to ``when``."""
    async with scheduler.app.engine.begin() as conn:
        await conn.execute(
            update(JOBS_TABLE).where(JOBS_TABLE.c.id == job_id).values(lockedAt=when)
        )


async def test_a_bad_usage_range_is_refused(scheduler: RunningScheduler) -> None:
    admin = _admin(scheduler)
    for request, field in (
        (admin_pb.GetUserUsageRequest(user_id="u", from_date="2026-13-01"), "from_date"),
        (
            admin_pb.GetUserUsageRequest(user_id="u", from_date="2026-02-01", to_date="2026-01-01"),
            "to_date",
        ),
        (
            admin_pb.GetUserUsageRequest(user_id="u", from_date="2024-01-01", to_date="2026-01-01"),
            "to_date",
        ),
        (admin_pb.GetUserUsageRequest(user_id="has space"), "user_id"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await admin.GetUserUsage(request, metadata=bearer(ADMIN_TOKEN), timeout=30)
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert field in (caught.value.details() or "")


async def test_a_model_keys_daily_cost_cap_stops_dispatch_on_that_key(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    models = {"synthetic_echo": "deepseek-v4-flash", "quiz_generation": "other-model"}
    registry = JobRegistry(
        dataclasses.replace(d, model_name=models.get(d.job_type, d.model_name))
        for d in fast_registry()
    )
    scheduler = await start_scheduler(mysql_url, registry=registry)
    limit = admin_pb.ModelLimit(
        provider="deepseek",
        model="deepseek-v4-flash",
        credential_scope="platform",
        daily_cost_micros=CALL_COST,
    )
    await _admin(scheduler).PutModelLimit(
        admin_pb.PutModelLimitRequest(limit=limit), metadata=bearer(ADMIN_TOKEN), timeout=30
    )
    jobs = JobClient(scheduler.channel, "capped-user")
    runtime = ClientRuntime(
        scheduler.channel, "rt-capped", job_types=["synthetic_echo", "quiz_generation"], slots=1
    )
    await jobs.create()
    await runtime.connect()
    try:
        await _succeed(runtime, await runtime.next_lease())  # the key's whole day: spent
        capped = (await jobs.create()).job_id
        other = (await jobs.create("quiz_generation", LEARNING)).job_id
        runtime.credit()
        assert (await runtime.next_lease()).job_id == other  # the older job waits for midnight
    finally:
        await runtime.close()
    stats = await _admin(scheduler).GetQueueStats(
        admin_pb.GetQueueStatsRequest(), metadata=bearer(ADMIN_TOKEN), timeout=30
    )
    (key,) = [k for k in stats.model_keys if k.limit.model == "deepseek-v4-flash"]
    assert (key.cost_today_micros, key.limit.daily_cost_micros) == (CALL_COST, CALL_COST)
    assert (await job_row(scheduler.app.engine, capped))["lifecycleStatus"] == "queued"


JOBS_TABLE = cast(Table, AiJob.__table__)


async def _token_estimates(scheduler: RunningScheduler, user: str, status: str = "") -> list[int]:
    jobs = JOBS_TABLE
    query = select(jobs.c.tokenEstimate).where(jobs.c.userId == user)
    if status:
        query = query.where(jobs.c.lifecycleStatus == status)
    async with scheduler.app.engine.connect() as conn:
        return [int(v) for v in (await conn.execute(query)).scalars()]


async def test_concurrent_creates_reserve_their_estimates_against_the_budget(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    """Forty concurrent creates against a 400-token budget all passed (spend is known
    only once a call ends) and spent it 28.8 times over. Each create now reserves its estimate
    under the user's gate lock: what is admitted fits the budget but for one job's estimate."""
    scheduler = await start_scheduler(mysql_url, reaper_interval_s=3_600)
    await _admin(scheduler).PutUserBudget(
        admin_pb.PutUserBudgetRequest(user_id="racer", daily_tokens=5_000),
        metadata=bearer(ADMIN_TOKEN),
        timeout=30,
    )
    racer = JobClient(scheduler.channel, "racer")

    async def create() -> str:
        try:
            return (await racer.create()).job_id
        except grpc.aio.AioRpcError as refused:
            assert error_reason(refused) == "BUDGET_EXCEEDED"
            return ""

    created = [job for job in await asyncio.gather(*(create() for _ in range(40))) if job]
    estimates = await _token_estimates(scheduler, "racer")
    assert len(estimates) == len(created) >= 1
    assert sum(estimates) <= 5_000 + max(estimates)
    assert len(created) < 40


async def test_dispatch_reserves_running_estimates_against_the_budget(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, reaper_interval_s=3_600)
    racer = JobClient(scheduler.channel, "racer")
    for _ in range(10):
        await racer.create()  # no budget yet: all ten are queued
    (estimate,) = set(await _token_estimates(scheduler, "racer"))
    await _admin(scheduler).PutUserBudget(
        admin_pb.PutUserBudgetRequest(user_id="racer", daily_tokens=2 * estimate + 100),
        metadata=bearer(ADMIN_TOKEN),
        timeout=30,
    )
    runtime = ClientRuntime(scheduler.channel, "rt-reserve", slots=10)
    await runtime.connect()
    try:
        leases = [await runtime.next_lease() for _ in range(2)]
        await scheduler.app.dispatcher._dispatch_round()  # another round: nothing more fits
        assert len(await _token_estimates(scheduler, "racer", "running")) == 2
        await runtime.submit(leases[0], echo_output(leases[0]))  # spends 15 tokens
        third = await runtime.next_lease()  # a reservation freed: one more fits
        assert third.job_id not in {lease.job_id for lease in leases}
    finally:
        await runtime.close()

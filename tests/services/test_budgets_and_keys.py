"""Budgets and model limits in the fast tier: the in-memory unit of work keeps spend, budgets and
model-key state as the SQL stores do, so the services' refusals and pauses run without a
database."""

from __future__ import annotations

import json
import random

import pytest

from scheduler_service.core.budgets import Budget
from scheduler_service.core.commands import JobLimits
from scheduler_service.core.errors import LimitExceededError
from scheduler_service.core.job_definitions import USER_KEY_MODE
from scheduler_service.core.model_keys import FlowPolicy, ModelKeyLimits
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.core.usage import Usage
from scheduler_service.services.jobs import JobService
from scheduler_service.services.reports import (
    FailureReport,
    ResultSubmission,
)
from scheduler_service.services.runtime_pieces import ReportLimits, RuntimePieces, runtime_pieces
from shared.canonical_json import output_hash
from shared.error_codes import ErrorCode
from tests.services.test_job_service import command
from tests.support.fake_uow import FakeUnitOfWork
from tests.support.schedulers import fast_registry

#: Room for a few jobs' estimates; one answer below spends it all.
BUDGET = Budget(daily_tokens=100_000)
OUTPUT = {"echo": {"text": "hello"}}
FLOW = FlowPolicy(ModelKeyLimits(max_concurrency=4), USER_KEY_MODE)


def _services(uow: FakeUnitOfWork, budget: Budget = BUDGET) -> tuple[JobService, RuntimePieces]:
    registry = fast_registry()
    jobs = JobService(uow, registry, limits=JobLimits(max_active_jobs_per_user=50), budget=budget)
    protocol = runtime_pieces(
        uow,
        registry,
        budget=budget,
        flow=FLOW,
        rng=random.Random(3),
        reports=ReportLimits(window_s=0),
    )
    return jobs, protocol


async def test_a_spent_budget_refuses_the_next_create_and_holds_back_queued_jobs() -> None:
    uow = FakeUnitOfWork()
    jobs, protocol = _services(uow)
    first, _ = await jobs.create(command("spender"))
    waiting, _ = await jobs.create(command("spender"))
    (lease,) = await protocol.leasing.claim("rt-1", ["synthetic_echo"], 1)
    assert lease.job_id == first.id
    usage = Usage("m", prompt_tokens=90_000, completion_tokens=20_000, latency_ms=5, cost_micros=0)
    submitted = ResultSubmission(
        lease.job_id, 1, "rt-1", output_hash(OUTPUT), json.dumps(OUTPUT), usage, lease.lease_token
    )
    await protocol.reports.submit_result(submitted)

    with pytest.raises(LimitExceededError) as refused:
        await jobs.create(command("spender"))
    assert refused.value.code is ErrorCode.BUDGET_EXCEEDED
    # The job queued before the budget ran out is not leased; another user's job is.
    other, _ = await jobs.create(command("someone-else"))
    leased = await protocol.leasing.claim("rt-1", ["synthetic_echo"], 5)
    assert [lease.job_id for lease in leased] == [other.id]
    assert uow.state.jobs[waiting.id]["lifecycleStatus"] == LifecycleStatus.QUEUED.value


async def test_a_429_pauses_its_model_key_until_its_retry_after() -> None:
    uow = FakeUnitOfWork()
    jobs, protocol = _services(uow, Budget())
    for _ in range(3):
        await jobs.create(command("user-1"))
    (lease,) = await protocol.leasing.claim("rt-1", ["synthetic_echo"], 1)
    limited = FailureReport(
        lease.job_id,
        lease.attempt_no,
        "rt-1",
        ErrorCode.MODEL_RATE_LIMIT.value,
        True,
        "slow down",
        "",
        retry_after_ms=5_000,
        usage=None,
        lease_token=lease.lease_token,
    )
    await protocol.reports.submit_failure(limited)

    assert await protocol.leasing.claim("rt-1", ["synthetic_echo"], 5) == []
    (stats,) = await uow.read(lambda tx: tx.keys.stats(FLOW))
    assert stats.paused_until is not None and stats.rate_limited_total == 1
    assert stats.effective_concurrency == 2  # halved from the limit of 4
    uow.clock.advance(6)
    resumed = await protocol.leasing.claim("rt-1", ["synthetic_echo"], 5)
    assert len(resumed) == 2  # the pause is over; the halved window bounds the rest

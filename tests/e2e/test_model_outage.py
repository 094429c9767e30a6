"""A provider's bad hour, on real runtime processes: the primary model of a job type's route
fails (a 503 storm, or connections that hang without a byte) in the middle of a drain; its
circuit breaker opens within a few calls, the jobs run on the fallback tier meanwhile (another
provider, a second scripted server), no job fails, hardly an attempt is spent, and once the
outage is over the primary takes work again.

The scripted servers answer each call after a fixed latency, so the runtimes' slots bound the
drain's speed: when the outage ends, jobs are left for the primary to take."""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from devtools.harness import tokens
from devtools.harness.procs import runtime_processes
from devtools.harness.runtime_client import JobClient
from devtools.harness.waiting import eventually
from devtools.scripted_model import ScriptedModelServer, key_label
from scheduler_service.core.prices import DEFAULT_PRICES
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from tests.support.db_checks import JOBS, USAGE, job_row
from tests.support.fakes import running_model_server
from tests.support.runtime_procs import Launcher, status_is
from tests.support.schedulers import RunningScheduler, SchedulerFactory

pytestmark = pytest.mark.mysql

PRIMARY = "deepseek-v4-pro"
FALLBACK = "backup-flash"
FAILURES_TO_OPEN = 5
#: The second provider's own prices (micro-units per million prompt/cached/completion tokens).
FALLBACK_RATES = "3000000/300000/6000000"
RUNTIMES, SLOTS = 2, 3


@dataclass(frozen=True)
class Outage:
    fault: str
    seconds: float
    jobs: int
    latency_ms: int
    cool_down_s: float


@pytest.fixture
def servers() -> Iterator[tuple[ScriptedModelServer, ScriptedModelServer]]:
    """DeepSeek's stand-in and a second provider's, both answering after a fixed latency."""
    with running_model_server() as primary, running_model_server() as backup:
        yield primary, backup


async def _drain_through(
    outage: Outage,
    servers: tuple[ScriptedModelServer, ScriptedModelServer],
    start_scheduler: SchedulerFactory,
    mysql_url: str,
    tmp_path: Path,
) -> tuple[RunningScheduler, dict[str, int]]:
    primary, backup = servers
    for server in servers:
        server.state.default_fault = f"latency:{outage.latency_ms}"
    scheduler = await start_scheduler(
        mysql_url,
        max_active_jobs_per_user=outage.jobs,
        model_routes=f"synthetic_echo=deepseek/{PRIMARY},backup/{FALLBACK}",
        breaker_failures=FAILURES_TO_OPEN,
        breaker_cool_down_s=outage.cool_down_s,
        model_prices=f"{DEFAULT_PRICES},{FALLBACK}={FALLBACK_RATES}",
    )
    with runtime_processes(
        primary.base_url,
        tmp_path,
        AIJOB_PROVIDER_BACKUP_BASE_URL=backup.base_url,
        AIJOB_PROVIDER_BACKUP_API_KEY="backup-platform-key",
        AIJOB_MODEL_SILENCE_S="2",
        AIJOB_RUNTIME_SLOTS=str(SLOTS),
    ) as launch:
        for n in range(RUNTIMES):
            launch(scheduler.address, f"outage-rt-{n}")
        jobs = JobClient(scheduler.channel)
        gate = asyncio.Semaphore(16)

        async def create(index: int) -> None:
            async with gate:
                await jobs.create(snapshot={"index": index})

        await asyncio.gather(*(create(i) for i in range(outage.jobs)))
        engine = scheduler.app.engine

        async def by_status() -> dict[str, int]:
            query = select(JOBS.c.lifecycleStatus, func.count()).group_by(JOBS.c.lifecycleStatus)
            async with engine.connect() as conn:
                return {status: n for status, n in (await conn.execute(query)).all()}

        async def some_succeeded() -> bool:
            return (await by_status()).get("succeeded", 0) >= 2 * RUNTIMES * SLOTS

        await eventually(some_succeeded, within_s=120, every_s=0.2)
        primary.state.outages.start(PRIMARY, outage.fault, outage.seconds)
        over_at = time.monotonic() + outage.seconds

        async def outage_over() -> bool:
            return time.monotonic() >= over_at

        await eventually(outage_over, within_s=outage.seconds + 30, every_s=0.5)
        counts = {
            "primary_during": primary.state.counts[f"outage:{PRIMARY}"],
            "primary_before_end": primary.state.counts[f"model:{PRIMARY}"],
        }
        left = outage.jobs - (await by_status()).get("succeeded", 0)
        # The latency bounds the drain's speed: the outage ends with jobs left for the primary.
        assert left >= RUNTIMES * SLOTS, left

        async def drained() -> bool:
            statuses = await by_status()
            return statuses.get("succeeded", 0) + statuses.get("failed", 0) == outage.jobs

        await eventually(drained, within_s=300, every_s=0.5)
        counts["primary_total"] = primary.state.counts[f"model:{PRIMARY}"]
        counts["fallback_total"] = backup.state.counts[f"model:{FALLBACK}"]
        return scheduler, counts


async def _check_outcome(
    scheduler: RunningScheduler, outage: Outage, counts: dict[str, int]
) -> None:
    async with scheduler.app.engine.connect() as conn:
        statuses: dict[str, int] = dict(
            (
                await conn.execute(
                    select(JOBS.c.lifecycleStatus, func.count()).group_by(JOBS.c.lifecycleStatus)
                )
            ).all()
        )
        spent = (
            await conn.execute(select(func.sum(JOBS.c.attemptCount - JOBS.c.waivedAttempts - 1)))
        ).scalar_one()
        tiers: dict[str, int] = dict(
            (
                await conn.execute(
                    select(JOBS.c.modelTier, func.count()).group_by(JOBS.c.modelTier)
                )
            ).all()
        )
        ledger = (
            await conn.execute(
                select(USAGE.c.modelTier, USAGE.c.model, func.min(USAGE.c.costMicros))
                .where(USAGE.c.errorCode.is_(None))
                .group_by(USAGE.c.modelTier, USAGE.c.model)
            )
        ).all()
    assert statuses == {"succeeded": outage.jobs}, (statuses, counts)
    # The ledger says which tier answered, each priced at its own model's rates.
    answered = {(tier, model) for tier, model, _ in ledger}
    assert answered == {("primary", PRIMARY), ("fallback", FALLBACK)}, ledger
    assert all(cheapest > 0 for _, _, cheapest in ledger), ledger
    # The breaker opened within a few calls: those in flight when the outage began, the ones
    # that opened it, and one probe per cool-down; not a call per job the outage lasted.
    probes = outage.seconds / outage.cool_down_s + 1
    assert counts["primary_during"] <= FAILURES_TO_OPEN + RUNTIMES * SLOTS + probes, counts
    # Attempts spent on the outage: at most the calls that opened the breaker (a failure whose
    # job another tier takes goes back unspent).
    assert int(spent or 0) <= FAILURES_TO_OPEN, (spent, counts)
    # The fallback answered meanwhile, and the primary took work again once it recovered
    # (more than its one probe).
    assert tiers.get("fallback", 0) > 0 and counts["fallback_total"] > 0, (tiers, counts)
    assert counts["primary_total"] - counts["primary_before_end"] >= 2, counts
    assert tiers.get("primary", 0) > 0, tiers


async def test_a_503_storm_on_the_primary_fails_no_job(
    servers: tuple[ScriptedModelServer, ScriptedModelServer],
    start_scheduler: SchedulerFactory,
    mysql_url: str,
    tmp_path: Path,
) -> None:
    outage = Outage("503", seconds=60, jobs=300, latency_ms=1800, cool_down_s=10)
    scheduler, counts = await _drain_through(outage, servers, start_scheduler, mysql_url, tmp_path)
    await _check_outcome(scheduler, outage, counts)


async def test_hanging_connections_on_the_primary_fail_no_job(
    servers: tuple[ScriptedModelServer, ScriptedModelServer],
    start_scheduler: SchedulerFactory,
    mysql_url: str,
    tmp_path: Path,
) -> None:
    """The primary accepts each call and sends nothing: the runtimes' silence timeout (2 s
    here) ends each as MODEL_TIMEOUT, which the breaker counts as it counts a 503."""
    outage = Outage("hang", seconds=20, jobs=150, latency_ms=1200, cool_down_s=5)
    scheduler, counts = await _drain_through(outage, servers, start_scheduler, mysql_url, tmp_path)
    await _check_outcome(scheduler, outage, counts)


USER_KEY = "sk-user-unpaid-0123456789abcdef"
PLATFORM_KEY = "sk-platform-key-for-the-fleet-0001"


async def test_an_unpaid_user_key_holds_that_users_jobs_and_no_one_elses(
    mysql_url: str,
    start_scheduler: SchedulerFactory,
    launch: Launcher,
    model_server: ScriptedModelServer,
) -> None:
    """A 402 on a user's own key opens that key's breaker until an operator resets it: the
    user's jobs wait queued, saying why, without spending attempts or touching the platform's
    key; other users' jobs run meanwhile; the reset lets the waiting jobs run."""
    scheduler = await start_scheduler(
        mysql_url, credential_key=base64.b64encode(os.urandom(32)).decode()
    )
    model = scheduler.app.registry.get("synthetic_echo").model_name
    model_server.state.outages.start(model, "402", 3_600, api_key=USER_KEY)
    broke, paying = JobClient(scheduler.channel, "learner-broke"), JobClient(scheduler.channel)
    stored = await broke.stub.PutUserCredential(
        job_pb.PutUserCredentialRequest(provider="deepseek", api_key=USER_KEY),
        metadata=broke.metadata,
        timeout=30,
    )
    launch(scheduler, "rt-unpaid", DEEPSEEK_API_KEY=PLATFORM_KEY)
    own_key: dict[str, Any] = {
        "credential_mode": "user_deepseek_key",
        "credential_id": stored.credential_id,
    }
    first = await broke.create(**own_key)

    async def told_why() -> bool:
        job = await broke.get(first.job_id)
        return job.error_code == "MODEL_INSUFFICIENT_BALANCE"

    await eventually(told_why)
    waiting = await broke.get(first.job_id)
    assert waiting.lifecycle_status == "queued", waiting
    assert waiting.public_error_message
    later = [await broke.create(**own_key) for _ in range(3)]
    others = [await paying.create() for _ in range(3)]
    for job in others:
        await status_is(scheduler, job.job_id, "succeeded")
    # The user's jobs wait: the unpaid key is called no more, the platform's key never for them.
    keys = model_server.state.stats()["keys"]
    unpaid_calls = keys[key_label(USER_KEY)]["requests"]
    assert unpaid_calls == 1, keys
    assert keys[key_label(PLATFORM_KEY)]["requests"] == len(others)
    for job in [first, *later]:
        assert (await broke.get(job.job_id)).lifecycle_status == "queued"
    admin = admin_service_pb2_grpc.AdminServiceStub(scheduler.channel)
    operator = tokens.bearer(tokens.ADMIN_TOKEN)
    limits = await admin.ListModelLimits(
        admin_pb.ListModelLimitsRequest(), metadata=operator, timeout=30
    )
    states = {(m.model, m.credential_scope): m.breaker_state for m in limits.limits}
    assert states[(model, "user")] == admin_pb.BREAKER_STATE_OPEN, limits

    # Topped up: the operator resets the breaker and the waiting jobs run, no attempt spent.
    model_server.state.outages.start(model, "402", 0, api_key=USER_KEY)
    reset = await admin.ResetModelBreaker(
        admin_pb.ResetModelBreakerRequest(
            provider="deepseek", model=model, credential_id=stored.credential_id
        ),
        metadata=operator,
        timeout=30,
    )
    assert reset.was_open
    for job in [first, *later]:
        await status_is(scheduler, job.job_id, "succeeded")
        row = await job_row(scheduler.app.engine, job.job_id)
        assert row["attemptCount"] - row["waivedAttempts"] == 1, row
    assert model_server.state.stats()["keys"][key_label(PLATFORM_KEY)]["requests"] == len(others)

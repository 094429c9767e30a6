"""LLM flow control over real gRPC on real MariaDB: a 429 pauses its model key on
every replica until its Retry-After while other keys keep running; operators set and read limits
with AdminService."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime, timedelta

import grpc
import pytest
from prometheus_client import REGISTRY

from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output
from devtools.harness.tokens import ADMIN_TOKEN, bearer
from scheduler_service.core.job_registry import JobRegistry
from scheduler_service.services import metrics
from scheduler_service.services.flow import ModelKeys
from scheduler_service.sql import model_key_statements as flow_sql
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc, types_pb2
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.model_catalogue import ACCOUNT_CONCURRENCY, FLASH
from shared.status_details import error_reason
from tests.support.db import db_now_value
from tests.support.db_checks import job_row
from tests.support.outputs import QUIZ
from tests.support.schedulers import RunningScheduler, SchedulerFactory, fast_registry

pytestmark = pytest.mark.mysql

LEARNING = {"learner": {"id": "l-1"}, "material": {"id": "m-1", "title": "Cells"}}


def _two_models() -> JobRegistry:
    """synthetic_echo on model-a, quiz_generation on model-b: two model keys."""
    models = {"synthetic_echo": "model-a", "quiz_generation": "model-b"}
    return JobRegistry(
        dataclasses.replace(d, model_name=models.get(d.job_type, d.model_name))
        for d in fast_registry()
    )


async def test_a_429_pauses_its_key_on_every_replica_and_other_keys_keep_running(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    registry = _two_models()
    replicas = [await start_scheduler(mysql_url, registry=registry) for _ in range(2)]
    types = ["synthetic_echo", "quiz_generation"]
    runtimes = [
        ClientRuntime(replicas[n % 2].channel, f"rt-{n}", job_types=types, slots=2)
        for n in range(3)
    ]
    for runtime in runtimes:
        await runtime.connect()
    # Every lease of every runtime, in the order they arrive.
    merged: asyncio.Queue[tuple[types_pb2.Lease, ClientRuntime]] = asyncio.Queue()
    forwarders = [asyncio.ensure_future(_forward(r, merged)) for r in runtimes]
    try:
        jobs = JobClient(replicas[0].channel)
        first = await jobs.create()
        lease, holder = await asyncio.wait_for(merged.get(), 30)
        assert lease.job_id == first.job_id
        counted = _rate_limited("model-a")
        reply = await holder.fail(lease, "MODEL_RATE_LIMIT", retryable=True, retry_after_ms=3_000)
        assert reply.lifecycle_status == "queued"
        assert _rate_limited("model-a") == counted + 1
        stats = await _key_stats(replicas[1], "model-a")
        assert (stats.rate_limited_last_minute, stats.rate_limited_total) == (1, 1)
        paused_at = stats.paused_until.ToDatetime()
        # More work for both keys, through both replicas.
        echo = [(await JobClient(r.channel).create()).job_id for r in replicas]
        quiz = [
            (await JobClient(r.channel).create("quiz_generation", LEARNING)).job_id
            for r in replicas
        ]
        leased: dict[str, datetime] = {}
        while len(leased) < 5:  # the two quiz jobs, then model-a's three once the pause is over
            lease, holder = await asyncio.wait_for(merged.get(), 30)
            leased[lease.job_id] = (await job_row(replicas[0].app.engine, lease.job_id))["lockedAt"]
            # Finished at once: the 429 halved model-a's concurrency, successes win it back.
            await holder.submit(
                lease, QUIZ if lease.job_type == "quiz_generation" else echo_output(lease)
            )
            holder.credit()
        assert set(leased) == {first.job_id, *echo, *quiz}
        for job_id in (first.job_id, *echo):
            assert leased[job_id] >= paused_at.replace(tzinfo=None)  # by the database clock
        # That model-b went on meanwhile is shown without a clock in
        # tests/db/test_model_key_claims.py: a claim during the pause leases only its jobs.
    finally:
        for forwarder in forwarders:
            forwarder.cancel()
        for runtime in runtimes:
            await runtime.close()


async def _forward(
    runtime: ClientRuntime, merged: asyncio.Queue[tuple[types_pb2.Lease, ClientRuntime]]
) -> None:
    while True:
        merged.put_nowait((await runtime.leases.get(), runtime))


def _rate_limited(model: str) -> float:
    labels = {"provider": "deepseek", "model": model, "scope": "platform"}
    return REGISTRY.get_sample_value("aijob_model_rate_limited_total", labels) or 0.0


def _admin(scheduler: RunningScheduler) -> admin_service_pb2_grpc.AdminServiceAsyncStub:
    return admin_service_pb2_grpc.AdminServiceStub(scheduler.channel)


async def _key_stats(scheduler: RunningScheduler, model: str) -> admin_pb.ModelKeyStats:
    stats = await _admin(scheduler).GetQueueStats(
        admin_pb.GetQueueStatsRequest(), metadata=bearer(ADMIN_TOKEN), timeout=30
    )
    (found,) = [k for k in stats.model_keys if k.limit.model == model]
    return found


async def test_operators_set_and_read_model_limits(scheduler: RunningScheduler) -> None:
    admin, metadata = _admin(scheduler), bearer(ADMIN_TOKEN)
    limit = admin_pb.ModelLimit(
        provider="deepseek",
        model="deepseek-v4-flash",
        credential_scope="platform",
        max_concurrency=8,
        requests_per_minute=600,
        tokens_per_minute=1_000_000,
    )
    stored = await admin.PutModelLimit(
        admin_pb.PutModelLimitRequest(limit=limit), metadata=metadata, timeout=30
    )
    assert stored.limit == limit
    changed = admin_pb.ModelLimit()
    changed.CopyFrom(limit)
    changed.requests_per_minute = 300
    await admin.PutModelLimit(
        admin_pb.PutModelLimitRequest(limit=changed), metadata=metadata, timeout=30
    )
    listed = await admin.ListModelLimits(
        admin_pb.ListModelLimitsRequest(), metadata=metadata, timeout=30
    )
    changed.breaker_state = admin_pb.BREAKER_STATE_CLOSED
    assert list(listed.limits) == [changed]
    (stats,) = (await _key_stats(scheduler, "deepseek-v4-flash"),)
    assert (stats.in_flight, stats.effective_concurrency, stats.HasField("paused_until")) == (
        0,
        8,
        False,
    )
    metrics.publish_model_keys(
        await ModelKeys(scheduler.app.uow, scheduler.app.settings.flow).stats()
    )
    labels = {"provider": "deepseek", "model": "deepseek-v4-flash", "scope": "platform"}
    assert REGISTRY.get_sample_value("aijob_model_limit", labels) == 8
    assert REGISTRY.get_sample_value("aijob_model_paused", labels) == 0
    assert REGISTRY.get_sample_value("aijob_model_inflight", labels) == 0


@pytest.mark.parametrize(
    ("limit", "field"),
    [
        (admin_pb.ModelLimit(model="m", credential_scope="platform"), "limit.provider"),
        (admin_pb.ModelLimit(provider="p", credential_scope="platform"), "limit.model"),
        (
            admin_pb.ModelLimit(provider="p", model="m", credential_scope="team"),
            "limit.credential_scope",
        ),
        (
            admin_pb.ModelLimit(
                provider="p", model="m", credential_scope="user", max_concurrency=-1
            ),
            "limit.max_concurrency",
        ),
        (admin_pb.ModelLimit(provider="p q", model="m", credential_scope="user"), "limit.provider"),
    ],
)
async def test_a_bad_model_limit_is_refused_and_writes_nothing(
    scheduler: RunningScheduler, limit: admin_pb.ModelLimit, field: str
) -> None:
    admin, metadata = _admin(scheduler), bearer(ADMIN_TOKEN)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await admin.PutModelLimit(
            admin_pb.PutModelLimitRequest(limit=limit), metadata=metadata, timeout=30
        )
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error_reason(caught.value) == "INVALID_ARGUMENT"
    assert field in (caught.value.details() or "")
    listed = await admin.ListModelLimits(
        admin_pb.ListModelLimitsRequest(), metadata=metadata, timeout=30
    )
    assert not listed.limits


@pytest.mark.parametrize("on_stream", [False, True])
async def test_headers_saying_none_remain_pause_the_key_before_a_429(
    scheduler: RunningScheduler, on_stream: bool
) -> None:
    runtime = ClientRuntime(scheduler.channel, "rt-headers", slots=1)
    await runtime.connect()
    try:
        await JobClient(scheduler.channel).create()
        lease = await runtime.next_lease()
        request = runtime.result_request(lease, echo_output(lease))
        request.usage.rate_limits.limit_requests = 600
        request.usage.rate_limits.remaining_requests = 0
        request.usage.rate_limits.reset_requests.FromMilliseconds(2_000)
        if on_stream:
            ack = await runtime.report(rt.PollReport(result=request))
            assert ack.status.code == 0, ack.status
        else:
            await runtime.stub.SubmitResult(request, metadata=runtime.metadata, timeout=30)
        row = await job_row(scheduler.app.engine, lease.job_id)
        stats = await _key_stats(scheduler, "deepseek-v4-flash")
        after = await db_now_value(scheduler.app.engine)
    finally:
        await runtime.close()
    assert row["lifecycleStatus"] == "succeeded"
    # Paused for 2 s from a moment of the result's transaction, by the database clock.
    until = stats.paused_until.ToDatetime()
    assert row["finishedAt"] + timedelta(seconds=2) <= until <= after + timedelta(seconds=2)
    # Not congestion: no 429 counted, the concurrency left alone (the account's, as documented).
    assert (stats.rate_limited_total, stats.effective_concurrency) == (
        0,
        ACCOUNT_CONCURRENCY[FLASH],
    )


async def _slots_fill(runtime: ClientRuntime, count: int) -> list[types_pb2.Lease]:
    return [await runtime.next_lease() for _ in range(count)]


async def _answer(runtime: ClientRuntime, lease: types_pb2.Lease, first_token_ms: int) -> None:
    request = runtime.result_request(lease, echo_output(lease))
    request.usage.time_to_first_token_ms = first_token_ms
    await runtime.stub.SubmitResult(request, metadata=runtime.metadata, timeout=30)


async def test_an_unlimited_key_starts_slow_and_a_slow_first_token_halves_it(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    """No limit configured: the key's window starts at 4, doubles per round of answers, and a
    first token past 1.5 x the key's baseline halves it once (not once per slow answer)."""
    scheduler = await start_scheduler(
        mysql_url, model_initial_concurrency=4, model_latency_tolerance=1.5
    )
    for _ in range(20):
        await JobClient(scheduler.channel).create()
    runtime = ClientRuntime(scheduler.channel, "rt-probe", slots=20)
    await runtime.connect()
    try:
        first = await _slots_fill(runtime, 4)
        # One claim statement would have leased all 20 at once without the window.
        stats = await _key_stats(scheduler, "deepseek-v4-flash")
        assert (stats.in_flight, stats.effective_concurrency) == (4, 4)
        for lease in first:
            await _answer(runtime, lease, first_token_ms=100)
        second = await _slots_fill(runtime, 8)  # slow start: 4 answers, 4 more places
        stats = await _key_stats(scheduler, "deepseek-v4-flash")
        assert (stats.in_flight, stats.effective_concurrency) == (8, 8)
        for lease in second:
            await _answer(runtime, lease, first_token_ms=400)  # 4 x the baseline
        stats = await _key_stats(scheduler, "deepseek-v4-flash")
    finally:
        await runtime.close()
    # Halved by the first slow answer; the seven leased before that halving judged nothing.
    assert stats.effective_concurrency == 4
    assert stats.in_flight <= 4
    async with scheduler.app.engine.connect() as conn:
        (row,) = (await flow_sql.read_keys(conn))[1]
    assert (row.growthThreshold, row.decreasedAt is not None) == (4.0, True)


async def test_a_create_may_choose_an_allowed_model_and_the_lease_carries_it(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    # A starting window: every key met gets its row, so each shows in the stats.
    scheduler = await start_scheduler(mysql_url, model_initial_concurrency=4)
    jobs = JobClient(scheduler.channel)
    chosen = await jobs.create(model="deepseek-v4-pro", idempotency_key="k-pro")
    default = await jobs.create(idempotency_key="k-default")
    assert (chosen.model_name, chosen.model_provider) == ("deepseek-v4-pro", "deepseek")
    assert default.model_name == "deepseek-v4-flash"
    # Naming the default model is the same request as naming none; another model is not.
    again = await jobs.create(model="deepseek-v4-flash", idempotency_key="k-default")
    assert again.job_id == default.job_id
    with pytest.raises(grpc.aio.AioRpcError) as reused:
        await jobs.create(model="deepseek-v4-pro", idempotency_key="k-default")
    assert error_reason(reused.value) == "IDEMPOTENCY_KEY_REUSED"
    runtime = ClientRuntime(scheduler.channel, "rt-models", slots=2)
    await runtime.connect()
    try:
        leases = {lease.job_id: lease for lease in [await runtime.next_lease() for _ in range(2)]}
        chosen_stats = await _key_stats(scheduler, "deepseek-v4-pro")
    finally:
        await runtime.close()
    assert leases[chosen.job_id].model_name == "deepseek-v4-pro"
    assert leases[default.job_id].model_name == "deepseek-v4-flash"
    assert chosen_stats.in_flight == 1  # its own model key


async def test_a_model_the_job_type_does_not_allow_is_refused_and_writes_nothing(
    scheduler: RunningScheduler,
) -> None:
    jobs = JobClient(scheduler.channel)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await jobs.create(model="gpt-4o", idempotency_key="k-refused")
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error_reason(caught.value) == "INVALID_ARGUMENT"
    assert "model" in (caught.value.details() or "")
    created = await jobs.create(idempotency_key="k-refused")  # the key was never taken
    assert created.model_name == "deepseek-v4-flash"

"""The database goes away for longer than a lease while a scheduler process and a runtime
process are working, then comes back (reliability S20).

The MariaDB here is the test's own (tests/own_mariadb.py), stopped cleanly and started again on
the same datadir. Both services must stay up; the scheduler's health goes NOT_SERVING and back
to SERVING; afterwards every job succeeded once and every event was published once. Leases are
judged by the database's clock, so the ones that ran out during the outage are taken back by the
reaper, and their late results are refused.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sqlalchemy import text

from devtools.harness.procs import free_port, launch_scheduler, wait_until_serving
from devtools.harness.runtime_client import JobClient
from devtools.harness.waiting import eventually
from devtools.scripted_model import ScriptedModelServer
from scheduler_service.sql.db.engine import create_engine
from shared.canonical_json import output_hash
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.status_details import error_reason
from tests.support.ledger import (
    assert_every_job_once,
    read_ledger,
    succeeded_count,
    wait_until_published,
    wait_until_succeeded,
)
from tests.support.own_mariadb import OwnMariaDB
from tests.support.rpcs import SERVICES, every_rpc
from tests.support.runtime_procs import Launcher
from tests.support.schedulers import SchedulerFactory
from tests.support.schema_copy import migrated

pytestmark = pytest.mark.mysql

JOBS_TOTAL = 60
LEASE_TTL_S, LEASE_GRACE_S = 2.0, 0.5
#: Longer than a lease and its grace: every lease held when the database went away runs out.
OUTAGE_S = LEASE_TTL_S + LEASE_GRACE_S + 1.5

Serving = health_pb2.HealthCheckResponse.ServingStatus


@pytest.fixture
async def own_database(tmp_path: Path) -> AsyncIterator[tuple[OwnMariaDB, str]]:
    server = OwnMariaDB(tmp_path / "mariadb")
    await asyncio.to_thread(server.install)
    await asyncio.to_thread(server.start)
    admin = create_engine(server.url("mysql"), pool_size=1)
    async with admin.begin() as conn:
        await conn.execute(text("CREATE DATABASE aijob"))
    await admin.dispose()
    url = server.url("aijob")
    await migrated(url)
    try:
        yield server, url
    finally:
        await asyncio.to_thread(server.stop)


async def _health(address: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        try:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=2
            )
        except grpc.aio.AioRpcError:
            return -1
        return int(reply.status)


async def _health_is(address: str, status: int) -> None:
    async def check() -> bool:
        return await _health(address) == status

    await eventually(check, within_s=60, every_s=0.1)


async def test_the_database_away_longer_than_a_lease(
    own_database: tuple[OwnMariaDB, str],
    launch: Launcher,
    model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:
    server, url = own_database
    address = f"127.0.0.1:{free_port()}"
    scheduler = launch_scheduler(
        url,
        address,
        tmp_path / "scheduler.log",
        AIJOB_LEASE_TTL_S=str(LEASE_TTL_S),
        AIJOB_LEASE_GRACE_S=str(LEASE_GRACE_S),
        AIJOB_REAPER_INTERVAL_S="0.2",
        AIJOB_HEALTH_INTERVAL_S="0.1",
    )
    try:
        await asyncio.to_thread(wait_until_serving, address)
        model_server.state.default_fault = "latency:300"  # jobs are in flight when it goes
        runtime = launch(
            address, "rt-outage", AIJOB_RUNTIME_SLOTS="8", AIJOB_STREAM_BATCH_FRAMES="true"
        )
        async with grpc.aio.insecure_channel(address) as channel:
            jobs = JobClient(channel)
            for index in range(JOBS_TOTAL):
                await jobs.create(snapshot={"index": index})

        await wait_until_succeeded(url, JOBS_TOTAL // 4)
        done_before = await succeeded_count(url)
        await asyncio.to_thread(server.stop)
        assert done_before < JOBS_TOTAL - 8, "the outage must come while work is in flight"
        await _health_is(address, Serving.NOT_SERVING)
        await asyncio.sleep(OUTAGE_S)  # the fault itself: the database stays away this long
        assert scheduler.poll() is None and runtime.poll() is None, "a service died"
        await asyncio.to_thread(server.start)
        await _health_is(address, Serving.SERVING)

        await wait_until_succeeded(url, JOBS_TOTAL, within_s=120)
        await wait_until_published(url, 2 * JOBS_TOTAL, within_s=60)
        assert_every_job_once(await read_ledger(url), JOBS_TOTAL)
        assert runtime.poll() is None
    finally:
        scheduler.terminate()
        assert await asyncio.to_thread(scheduler.wait, 60) == 0


def _every_rpc_request(job_id: str) -> dict[str, Message]:
    """A well-formed request for every RPC (so that each reaches the database), by method."""
    holder, attempt = "rt-outage", 1
    output = {"echo": "x"}
    return {
        "JobService/CreateJob": job_pb.CreateJobRequest(
            job_type="synthetic_echo", idempotency_key="outage-1", snapshot=_struct({"a": 1})
        ),
        "JobService/CreateJobs": job_pb.CreateJobsRequest(
            items=[
                job_pb.CreateJobsItem(
                    job=job_pb.CreateJobRequest(
                        job_type="synthetic_echo", idempotency_key="outage-2", snapshot=_struct({})
                    )
                )
            ]
        ),
        "JobService/GetJob": job_pb.GetJobRequest(job_id=job_id),
        "JobService/GetJobTree": job_pb.GetJobTreeRequest(job_id=job_id),
        "JobService/CancelJob": job_pb.CancelJobRequest(job_id=job_id),
        "JobService/WatchJob": job_pb.WatchJobRequest(job_id=job_id),
        "JobService/ListJobs": job_pb.ListJobsRequest(),
        "JobService/SubscribeEvents": job_pb.SubscribeEventsRequest(),
        "AdminService/ListJobs": admin_pb.AdminListJobsRequest(),
        "AdminService/GetJob": job_pb.GetJobRequest(job_id=job_id),
        "AdminService/RetryJob": admin_pb.RetryJobRequest(job_id=job_id),
        "AdminService/GetQueueStats": admin_pb.GetQueueStatsRequest(),
        "AdminService/CancelUserJobs": admin_pb.CancelUserJobsRequest(user_id="user-1"),
        "AdminService/RedriveDeadEvents": admin_pb.RedriveDeadEventsRequest(),
        "AdminService/AdoptLegacyJobs": admin_pb.AdoptLegacyJobsRequest(job_type="active-recall"),
        "AdminService/ListAuditEntries": admin_pb.ListAuditEntriesRequest(),
        "AdminService/CancelJob": job_pb.CancelJobRequest(job_id=job_id),
        "AdminService/GetJobTimeline": admin_pb.GetJobTimelineRequest(job_id=job_id),
        "AdminService/GetJobTree": job_pb.GetJobTreeRequest(job_id=job_id),
        "JobService/StreamOutput": job_pb.StreamOutputRequest(job_id=job_id),
        "AdminService/PutModelLimit": admin_pb.PutModelLimitRequest(
            limit=admin_pb.ModelLimit(
                provider="deepseek", model="deepseek-chat", credential_scope="platform"
            )
        ),
        "AdminService/ListModelLimits": admin_pb.ListModelLimitsRequest(),
        "AdminService/PutModelRoute": admin_pb.ModelRoute(
            job_type="synthetic_echo",
            tiers=[admin_pb.ModelTier(provider="deepseek", model="deepseek-v4-flash")],
        ),
        "AdminService/GetModelRoute": admin_pb.GetModelRouteRequest(job_type="synthetic_echo"),
        "AdminService/ResetModelBreaker": admin_pb.ResetModelBreakerRequest(
            provider="deepseek", model="deepseek-v4-flash"
        ),
        "AdminService/ReencryptCredentials": admin_pb.ReencryptCredentialsRequest(),
        "AdminService/PutUserBudget": admin_pb.PutUserBudgetRequest(
            user_id="user-1", daily_tokens=10
        ),
        "AdminService/GetUserUsage": admin_pb.GetUserUsageRequest(user_id="user-1"),
        "JobService/PutUserCredential": job_pb.PutUserCredentialRequest(
            provider="deepseek", api_key="sk-outage-0123456789abcdef"
        ),
        "JobService/ListUserCredentials": job_pb.ListUserCredentialsRequest(),
        "JobService/DeleteUserCredential": job_pb.DeleteUserCredentialRequest(credential_id=job_id),
        "RuntimeService/Poll": rt.PollRequest(
            subscribe=rt.PollSubscribe(
                runtime_instance_id=holder, job_types=["synthetic_echo"], slots=1
            )
        ),
        "RuntimeService/Lock": rt.LockRequest(job_id=job_id, runtime_instance_id=holder),
        "RuntimeService/Heartbeat": rt.HeartbeatRequest(
            job_id=job_id, attempt_no=attempt, runtime_instance_id=holder, progress=5
        ),
        "RuntimeService/SubmitResult": rt.SubmitResultRequest(
            job_id=job_id,
            attempt_no=attempt,
            runtime_instance_id=holder,
            output_hash=output_hash(output),
            output_json=json.dumps(output),
        ),
        "RuntimeService/SubmitFailure": rt.SubmitFailureRequest(
            job_id=job_id,
            attempt_no=attempt,
            runtime_instance_id=holder,
            error_code="MODEL_TIMEOUT",
            retryable=True,
        ),
        "RuntimeService/ResolveCredential": rt.ResolveCredentialRequest(
            job_id=job_id, attempt_no=attempt, runtime_instance_id=holder
        ),
    }


#: RPCs that do not read the database, so answer while it is down.
NO_DATABASE = {"JobService/ListJobTypes", "AdminService/ListJobTypes"}


def _struct(values: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(values)
    return struct


async def _call(channel: grpc.aio.Channel, rpc: str, request: Message) -> grpc.aio.AioRpcError:
    service, method = rpc.split("/")
    pb2, pb2_grpc, _role = SERVICES[service]
    descriptor = pb2.DESCRIPTOR.services_by_name[service].methods_by_name[method]
    call = getattr(getattr(pb2_grpc, f"{service}Stub")(channel), method)
    metadata = (("x-user-id", "user-1"),)
    try:
        if descriptor.client_streaming:
            over = asyncio.Event()

            async def requests() -> AsyncIterator[Message]:
                yield request
                await over.wait()  # keep our side open, like a runtime, while the call lasts

            stream = call(requests(), metadata=metadata, timeout=20)
            try:
                async for _ in stream:
                    break
            finally:
                over.set()  # the call is over: its request pump may finish
        elif descriptor.server_streaming:
            async for _ in call(request, metadata=metadata, timeout=20):
                break
        else:
            await call(request, metadata=metadata, timeout=20)
    except grpc.aio.AioRpcError as error:
        return error
    raise AssertionError(f"{rpc} answered while the database was down")


async def test_every_rpc_answers_unavailable_while_the_database_is_down(
    own_database: tuple[OwnMariaDB, str], start_scheduler: SchedulerFactory
) -> None:
    """With the database stopped, each RPC that reads the database answers UNAVAILABLE with the
    catalogue's PLATFORM_UNAVAILABLE reason — reads, writes and streams alike, never INTERNAL."""
    server, url = own_database
    key = base64.b64encode(b"k" * 32).decode()
    running = await start_scheduler(url, health_interval_s=0.1, credential_key=key)
    job = await JobClient(running.channel).create()
    await asyncio.to_thread(server.stop)

    async def refused() -> bool:
        return not running.app.polls.database_reachable

    await eventually(refused, within_s=30, every_s=0.05)
    requests = _every_rpc_request(job.job_id)
    assert set(requests) | NO_DATABASE == {f"{s}/{m}" for s, m in every_rpc()}, (
        "a new RPC needs a request here"
    )
    # ListJobTypes reads the registry, not the database: it still answers.
    types = await JobClient(running.channel).stub.ListJobTypes(
        job_pb.ListJobTypesRequest(), metadata=(("x-user-id", "user-1"),), timeout=20
    )
    assert types.job_types
    answers = {}
    for rpc, request in requests.items():
        error = await _call(running.channel, rpc, request)
        answers[rpc] = (error.code(), error_reason(error))
    assert answers == {
        rpc: (grpc.StatusCode.UNAVAILABLE, "PLATFORM_UNAVAILABLE") for rpc in requests
    }

"""Users' model keys through the API: stored with PutUserCredential, used end to end
by a real runtime process (the scripted model sees that key, not the platform key), re-encrypted
under a new credential key with the old one then retired, and deleted — after which the job
fails INVALID_CREDENTIAL without a model call."""

from __future__ import annotations

import base64
import os
from typing import cast

import grpc
import pytest
from sqlalchemy import Table, select

from devtools.harness import tokens
from devtools.harness.runtime_client import JobClient
from devtools.scripted_model import ScriptedModelServer, key_label
from scheduler_service.sql.db.models import UserModelCredential
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.status_details import error_reason
from tests.support.db_checks import job_row
from tests.support.runtime_procs import Launcher, status_is
from tests.support.schedulers import RunningScheduler, SchedulerFactory

pytestmark = pytest.mark.mysql

CREDENTIALS = cast(Table, UserModelCredential.__table__)
USER_KEY = "sk-user-0123456789abcdef0123"
PLATFORM_KEY = "sk-platform-key-for-the-fleet-0001"


def _key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


async def _key_versions(scheduler: RunningScheduler) -> list[int]:
    async with scheduler.app.engine.connect() as conn:
        return list((await conn.execute(select(CREDENTIALS.c.keyVersion))).scalars())


async def _run_with_key(scheduler: RunningScheduler, jobs: JobClient, credential_id: str) -> str:
    job = await jobs.create(credential_mode="user_deepseek_key", credential_id=credential_id)
    await status_is(scheduler, job.job_id, "succeeded")
    return job.job_id


async def test_a_stored_key_runs_jobs_survives_rotation_and_deletion_stops_them(
    mysql_url: str,
    start_scheduler: SchedulerFactory,
    launch: Launcher,
    model_server: ScriptedModelServer,
) -> None:
    old, new = _key(), _key()
    first = await start_scheduler(mysql_url, credential_key=old)
    jobs = JobClient(first.channel, "learner-k")
    stored = await jobs.stub.PutUserCredential(
        job_pb.PutUserCredentialRequest(provider="deepseek", api_key=USER_KEY, label="mine"),
        metadata=jobs.metadata,
        timeout=30,
    )
    assert stored.hint == "sk-...0123" and USER_KEY not in str(stored)
    runtime = launch(first, "rt-user-keys", DEEPSEEK_API_KEY=PLATFORM_KEY)
    await _run_with_key(first, jobs, stored.credential_id)
    keys = model_server.state.stats()["keys"]
    assert keys[key_label(USER_KEY)]["requests"] == 1
    assert key_label(PLATFORM_KEY) not in keys
    runtime.terminate()
    runtime.wait()

    # Rotation: a replica with both keys re-encrypts every row under the newest; a replica
    # with only the new key then runs the job.
    both = await start_scheduler(mysql_url, credential_key=old, credential_keys=f"2={new}")
    admin = admin_service_pb2_grpc.AdminServiceStub(both.channel)
    moved = await admin.ReencryptCredentials(
        admin_pb.ReencryptCredentialsRequest(),
        metadata=tokens.bearer(tokens.ADMIN_TOKEN),
        timeout=30,
    )
    assert (moved.reencrypted, moved.key_version) == (1, 2)
    assert await _key_versions(both) == [2]
    again = await admin.ReencryptCredentials(
        admin_pb.ReencryptCredentialsRequest(),
        metadata=tokens.bearer(tokens.ADMIN_TOKEN),
        timeout=30,
    )
    assert again.reencrypted == 0
    rotated = await start_scheduler(mysql_url, credential_keys=f"2={new}")
    rotated_jobs = JobClient(rotated.channel, "learner-k")
    launch(rotated, "rt-rotated", DEEPSEEK_API_KEY=PLATFORM_KEY)
    await _run_with_key(rotated, rotated_jobs, stored.credential_id)
    assert model_server.state.stats()["keys"][key_label(USER_KEY)]["requests"] == 2

    # Deleted: a job still naming it fails INVALID_CREDENTIAL when leased, with no model call.
    await rotated_jobs.stub.DeleteUserCredential(
        job_pb.DeleteUserCredentialRequest(credential_id=stored.credential_id),
        metadata=rotated_jobs.metadata,
        timeout=30,
    )
    calls = model_server.state.stats()["requests"]
    job = await rotated_jobs.create(
        credential_mode="user_deepseek_key", credential_id=stored.credential_id
    )
    await status_is(rotated, job.job_id, "failed")
    row = await job_row(rotated.app.engine, job.job_id)
    assert (row["errorCode"], row["attemptCount"]) == ("INVALID_CREDENTIAL", 1)
    assert model_server.state.stats()["requests"] == calls
    listed = await rotated_jobs.stub.ListUserCredentials(
        job_pb.ListUserCredentialsRequest(), metadata=rotated_jobs.metadata, timeout=30
    )
    assert not listed.credentials
    async with rotated.app.engine.connect() as conn:
        (wiped,) = (await conn.execute(select(CREDENTIALS.c.ciphertext))).scalars()
    assert wiped == b""


@pytest.mark.parametrize(
    ("provider", "api_key", "field"),
    [
        ("deepseek", "not-a-deepseek-key-0123456789", "api_key"),
        ("deepseek", "sk-short", "api_key"),
        ("deepseek", "sk-has spaces 0123456789abcdef", "api_key"),
        ("openrouter", "sk-0123456789abcdef0123456789", "provider"),
    ],
)
async def test_a_malformed_key_is_refused_without_echoing_it(
    scheduler: RunningScheduler, provider: str, api_key: str, field: str
) -> None:
    jobs = JobClient(scheduler.channel, "learner-bad")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await jobs.stub.PutUserCredential(
            job_pb.PutUserCredentialRequest(provider=provider, api_key=api_key),
            metadata=jobs.metadata,
            timeout=30,
        )
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert field in (caught.value.details() or "")
    assert api_key not in (caught.value.details() or "")
    listed = await jobs.stub.ListUserCredentials(
        job_pb.ListUserCredentialsRequest(), metadata=jobs.metadata, timeout=30
    )
    assert not listed.credentials


async def test_another_user_neither_sees_nor_deletes_a_credential(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, credential_key=_key())
    owner, other = JobClient(scheduler.channel, "owner"), JobClient(scheduler.channel, "Owner")
    stored = await owner.stub.PutUserCredential(
        job_pb.PutUserCredentialRequest(provider="deepseek", api_key=USER_KEY),
        metadata=owner.metadata,
        timeout=30,
    )
    seen = await other.stub.ListUserCredentials(
        job_pb.ListUserCredentialsRequest(), metadata=other.metadata, timeout=30
    )
    assert not seen.credentials
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await other.stub.DeleteUserCredential(
            job_pb.DeleteUserCredentialRequest(credential_id=stored.credential_id),
            metadata=other.metadata,
            timeout=30,
        )
    assert (caught.value.code(), error_reason(caught.value)) == (
        grpc.StatusCode.NOT_FOUND,
        "CREDENTIAL_NOT_FOUND",
    )
    (mine,) = (
        await owner.stub.ListUserCredentials(
            job_pb.ListUserCredentialsRequest(), metadata=owner.metadata, timeout=30
        )
    ).credentials
    assert (mine.credential_id, mine.hint) == (stored.credential_id, "sk-...0123")


async def test_a_budget_stops_a_user_of_real_runtimes_and_not_another(
    mysql_url: str,
    start_scheduler: SchedulerFactory,
    launch: Launcher,
    model_server: ScriptedModelServer,
) -> None:
    """A budget of 1 token: the first job's call (counted by the scripted model) passes it; the
    jobs queued behind fail BUDGET_EXCEEDED without a model call, CreateJob refuses the user, and
    another user's job still runs."""
    scheduler = await start_scheduler(mysql_url, reaper_interval_s=0.2)
    admin = admin_service_pb2_grpc.AdminServiceStub(scheduler.channel)
    tight, other = JobClient(scheduler.channel, "tight"), JobClient(scheduler.channel, "other")
    # Queued before the budget is set: under it, the first job's estimate alone fills it and a
    # second create would be refused (each create reserves its estimate).
    first, *queued = [(await tight.create()).job_id for _ in range(3)]
    await admin.PutUserBudget(
        admin_pb.PutUserBudgetRequest(user_id="tight", daily_tokens=1),
        metadata=tokens.bearer(tokens.ADMIN_TOKEN),
        timeout=30,
    )
    launch(scheduler, "rt-budget", AIJOB_RUNTIME_SLOTS="1")  # one at a time: none in flight
    await status_is(scheduler, first, "succeeded")
    for job_id in queued:
        await status_is(scheduler, job_id, "failed")
        row = await job_row(scheduler.app.engine, job_id)
        assert (row["errorCode"], row["attemptCount"]) == ("BUDGET_EXCEEDED", 0)
    assert model_server.state.stats()["requests"] == 1
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await tight.create()
    assert error_reason(refused.value) == "BUDGET_EXCEEDED"
    theirs = (await other.create()).job_id
    await status_is(scheduler, theirs, "succeeded")
    usage = await admin.GetUserUsage(
        admin_pb.GetUserUsageRequest(user_id="tight"),
        metadata=tokens.bearer(tokens.ADMIN_TOKEN),
        timeout=30,
    )
    assert (usage.jobs, usage.attempts) == (1, 1)
    assert usage.tokens_today == usage.prompt_tokens + usage.completion_tokens > 1

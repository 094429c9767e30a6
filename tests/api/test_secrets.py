"""Secrets and job content stay out of logs; user keys are encrypted at rest and handed only to
the runtime that holds the job's lease; schedule-to-start deadlines expire jobs."""

from __future__ import annotations

import base64
import datetime
import logging
import os
from typing import cast

import grpc
import pytest
from google.protobuf import timestamp_pb2
from sqlalchemy import Table, select, update

from devtools.harness.runtime_client import ClientRuntime, JobClient
from scheduler_service.sql.credentials import CredentialCipher, CredentialUnavailableError
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.models import UserModelCredential
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.status_details import error_reason
from tests.support.db_checks import JOBS, events, job_row
from tests.support.schedulers import SchedulerFactory

pytestmark = pytest.mark.mysql

CANARY = "CANARY-7f3a9c"
CREDENTIALS = cast(Table, UserModelCredential.__table__)


def _key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


async def test_canary_never_reaches_a_log_line(
    mysql_url: str, start_scheduler: SchedulerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    service_token = f"svc-{CANARY}"
    scheduler = await start_scheduler(
        mysql_url, credential_key=_key(), service_tokens=service_token
    )
    credential_id = await scheduler.app.credentials.store("user-c", f"sk-{CANARY}-key")
    jobs = JobClient(scheduler.channel, "user-c", token=service_token)
    runtime = ClientRuntime(scheduler.channel, "rt-canary", slots=2)
    await runtime.connect()
    try:
        good = await jobs.create(
            snapshot={"text": f"secret {CANARY}"},
            credential_mode="user_deepseek_key",
            credential_id=credential_id,
        )
        lease = await runtime.next_lease()
        key = await runtime.stub.ResolveCredential(
            rt.ResolveCredentialRequest(
                job_id=good.job_id,
                attempt_no=1,
                runtime_instance_id="rt-canary",
                lease_token=lease.lease_token,
            ),
            metadata=runtime.metadata,
        )
        assert key.api_key == f"sk-{CANARY}-key"
        await runtime.submit(lease, {"echo": {"text": f"output {CANARY}"}})
        bad = await jobs.create(snapshot={"text": CANARY})
        failing = await runtime.next_lease()
        await runtime.stub.SubmitFailure(
            rt.SubmitFailureRequest(
                job_id=bad.job_id,
                attempt_no=1,
                runtime_instance_id="rt-canary",
                error_code="INVALID_SCHEMA",
                internal_error_message=f"model said {CANARY}",
                lease_token=failing.lease_token,
            ),
            metadata=runtime.metadata,
        )
        assert failing.job_id == bad.job_id
        with pytest.raises(grpc.aio.AioRpcError):  # a refused create with the canary in it
            await jobs.create(job_type="quiz_generation", snapshot={"learner": {"name": CANARY}})
        await jobs.get(good.job_id)
    finally:
        await runtime.close()
    lines = [record.getMessage() + " " + repr(record.__dict__) for record in caplog.records]
    assert lines, "the scheduler logged nothing: the test would prove nothing"
    assert not [line for line in lines if CANARY in line]
    # Lease tokens are secrets too: never logged, whole or as the stored digest's source.
    for token in (lease.lease_token, failing.lease_token):
        assert token and not [line for line in lines if token in line]


async def test_credentials_are_encrypted_and_bound_to_the_lease_holder(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    key = _key()
    scheduler = await start_scheduler(mysql_url, credential_key=key)
    credential_id = await scheduler.app.credentials.store("user-k", "sk-live-abcdef123456")
    async with scheduler.app.engine.connect() as conn:
        row = (
            await conn.execute(select(CREDENTIALS).where(CREDENTIALS.c.id == credential_id))
        ).one()
    assert b"sk-live" not in row.ciphertext
    cipher = CredentialCipher.from_base64(key)
    assert (
        cipher.decrypt("user-k", credential_id, 1, row.nonce, row.ciphertext)
        == "sk-live-abcdef123456"
    )
    with pytest.raises(CredentialUnavailableError):
        cipher.decrypt("another-user", credential_id, 1, row.nonce, row.ciphertext)

    jobs = JobClient(scheduler.channel, "user-k")
    job = await jobs.create(credential_mode="user_deepseek_key", credential_id=credential_id)
    holder = ClientRuntime(scheduler.channel, "rt-holder", slots=1)
    stub = holder.stub

    def ask(instance: str, attempt: int = 1, token: str = "") -> object:
        return stub.ResolveCredential(
            rt.ResolveCredentialRequest(
                job_id=job.job_id,
                attempt_no=attempt,
                runtime_instance_id=instance,
                lease_token=token,
            ),
            metadata=holder.metadata,
        )

    async def refused_as_lost(call: object) -> None:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call  # type: ignore[misc]
        assert (refused.value.code(), error_reason(refused.value)) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            "LEASE_LOST",
        )

    for call in (ask("rt-holder"), ask("rt-other")):  # not leased yet: nobody holds it
        await refused_as_lost(call)
    await holder.connect()
    try:
        lease = await holder.next_lease()
        token = lease.lease_token
        for call in (
            ask("rt-other", token=token),
            ask("rt-holder", attempt=2, token=token),
            ask("rt-holder"),  # no token
            ask("rt-holder", token=token[:-1]),  # a wrong one
        ):
            await refused_as_lost(call)
        reply = await ask("rt-holder", token=token)  # type: ignore[misc]
        assert reply.api_key == "sk-live-abcdef123456"
    finally:
        await holder.close()


async def test_a_job_past_its_deadline_expires(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, reaper_interval_s=3600)
    past = timestamp_pb2.Timestamp()
    past.FromDatetime(datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC))
    with pytest.raises(grpc.aio.AioRpcError) as refused:  # it could only expire
        await JobClient(scheduler.channel).create(deadline=past)
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "deadline" in (refused.value.details() or "")
    deadline = timestamp_pb2.Timestamp()
    deadline.FromDatetime(datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1))
    job = await JobClient(scheduler.channel).create(deadline=deadline)
    async with scheduler.app.engine.begin() as conn:  # an hour later, by the database clock
        await conn.execute(
            update(JOBS).where(JOBS.c.id == job.job_id).values(deadlineAt=db_now(-1_000))
        )
    assert await scheduler.app.reaper.reap_once() == 1
    row = await job_row(scheduler.app.engine, job.job_id)
    assert (row["lifecycleStatus"], row["errorCode"]) == ("failed", "JOB_EXPIRED")
    assert await events(scheduler.app.engine, job.job_id) == ["ai.job.enqueue", "ai.job.failed"]

"""A runtime is who its lease token and its bound token say, not who it claims to be.

Real MariaDB, real gRPC: another runtime token that replays the holder's instance id, job id and
attempt is refused on every lease-holding RPC, and the holder's result is the one accepted; a
token bound to an instance-id prefix cannot act outside it; user-key jobs go only to the runtimes
allowed to use user keys."""

from __future__ import annotations

import base64
import os
from typing import Any

import grpc
import pytest

from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output
from devtools.harness.tokens import bearer
from shared.canonical_json import output_hash
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.status_details import error_reason
from tests.support.db_checks import job_row
from tests.support.schedulers import RunningScheduler, SchedulerFactory

pytestmark = pytest.mark.mysql

HOLDER_TOKEN, OTHER_TOKEN = "rt-token-holder", "rt-token-other"
FLEET_TOKEN = "rt-token-user-key-fleet"
FORGED = {"echo": {"text": "forged"}}


async def _refusal(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value.code(), error_reason(caught.value)


def _lease_calls(lease: Any, instance: str, token: str) -> dict[str, tuple[str, Any]]:
    """Every RPC that acts on a lease, as (method, request) with ``token`` as lease token."""
    common = {"job_id": lease.job_id, "attempt_no": lease.attempt_no}
    holder = {**common, "runtime_instance_id": instance, "lease_token": token}
    return {
        "Heartbeat": ("Heartbeat", rt.HeartbeatRequest(**holder, progress=90)),
        "SubmitResult": (
            "SubmitResult",
            rt.SubmitResultRequest(
                **holder, output_hash=output_hash(FORGED), output_json='{"echo":{"text":"forged"}}'
            ),
        ),
        "SubmitFailure": (
            "SubmitFailure",
            rt.SubmitFailureRequest(**holder, error_code="NETWORK_ERROR", retryable=False),
        ),
        "ResolveCredential": ("ResolveCredential", rt.ResolveCredentialRequest(**holder)),
    }


async def _user_key_job(scheduler: RunningScheduler, user: str) -> Any:
    credential_id = await scheduler.app.credentials.store(user, "sk-user-secret-key")
    return await JobClient(scheduler.channel, user).create(
        credential_mode="user_deepseek_key", credential_id=credential_id
    )


async def test_a_replayed_instance_id_without_the_lease_token_is_refused(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(
        mysql_url,
        runtime_tokens=f"{HOLDER_TOKEN},{OTHER_TOKEN}",
        credential_key=base64.b64encode(os.urandom(32)).decode(),
    )
    job = await _user_key_job(scheduler, "user-victim")
    holder = ClientRuntime(scheduler.channel, "rt-holder-1", slots=1, token=HOLDER_TOKEN)
    attacker = ClientRuntime(scheduler.channel, "rt-attacker", slots=1, token=OTHER_TOKEN)
    await holder.connect()
    try:
        lease = await holder.next_lease()
        assert lease.job_id == job.job_id and len(lease.lease_token) >= 22  # ≥ 128 bits
        # Everything the holder's logs would show (instance id, job id, attempt), and no token
        # or a guessed one: each call is answered as an expired lease would be.
        for guess in ("", "0" * 32, lease.lease_token[:-2]):
            for method, request in _lease_calls(lease, "rt-holder-1", guess).values():
                call = getattr(attacker.stub, method)(request, metadata=attacker.metadata)
                # The instance id belongs to the token that subscribed it.
                assert await _refusal(call) == (
                    grpc.StatusCode.PERMISSION_DENIED,
                    "PERMISSION_DENIED",
                )
            for method, request in _lease_calls(lease, "rt-attacker", guess).values():
                call = getattr(attacker.stub, method)(request, metadata=attacker.metadata)
                assert await _refusal(call) == (grpc.StatusCode.FAILED_PRECONDITION, "LEASE_LOST")
        row = await job_row(scheduler.app.engine, job.job_id)
        assert (row["lifecycleStatus"], row["progress"], row["outputHash"]) == ("running", 0, None)
        # The holder's own calls, with its token, go through; its result is the one accepted.
        key = await holder.stub.ResolveCredential(
            _lease_calls(lease, "rt-holder-1", lease.lease_token)["ResolveCredential"][1],
            metadata=holder.metadata,
        )
        assert key.api_key == "sk-user-secret-key"
        assert (await holder.submit(lease, echo_output(lease))).duplicate is False
        row = await job_row(scheduler.app.engine, job.job_id)
        assert row["lifecycleStatus"] == "succeeded"
        assert row["outputHash"] == output_hash(echo_output(lease))
        assert row["leaseTokenHash"] != lease.lease_token  # stored as a digest only
    finally:
        await holder.close()


async def test_a_bound_token_acts_only_for_its_own_instances(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(
        mysql_url, runtime_identities="rt-a-=token-of-a,rt-b-=token-of-b"
    )
    await JobClient(scheduler.channel).create()
    runtime_a = ClientRuntime(scheduler.channel, "rt-a-1", slots=1, token="token-of-a")
    await runtime_a.connect()
    try:
        lease = await runtime_a.next_lease()
        # b holds a valid runtime token and even a's lease token: still not a.
        b = bearer("token-of-b")
        for method, request in _lease_calls(lease, "rt-a-1", lease.lease_token).values():
            call = getattr(runtime_a.stub, method)(request, metadata=b)
            assert await _refusal(call) == (
                grpc.StatusCode.PERMISSION_DENIED,
                "PERMISSION_DENIED",
            )
        lock = runtime_a.stub.Lock(
            rt.LockRequest(job_id=lease.job_id, runtime_instance_id="rt-a-2"), metadata=b
        )
        assert (await _refusal(lock))[0] is grpc.StatusCode.PERMISSION_DENIED
        impostor = ClientRuntime(scheduler.channel, "rt-a-9", slots=1, token="token-of-b")
        await impostor.connect()
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await impostor.stream_end()
        assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
        await impostor.close()
        # On a's own stream, a report naming another instance is refused in its ack alone.
        beat = _lease_calls(lease, "rt-b-1", lease.lease_token)["Heartbeat"][1]
        ack = await runtime_a.report(rt.PollReport(heartbeat=beat))
        assert ack.status.code == grpc.StatusCode.PERMISSION_DENIED.value[0]
        assert (await runtime_a.submit_on_stream(lease, echo_output(lease))).status.code == 0
    finally:
        await runtime_a.close()


async def test_user_key_jobs_go_only_to_runtimes_allowed_user_keys(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(
        mysql_url,
        user_key_runtimes="rt-keys-",
        runtime_identities=f"rt-keys-={FLEET_TOKEN}",
        credential_key=base64.b64encode(os.urandom(32)).decode(),
    )
    keyed = await _user_key_job(scheduler, "user-k")
    plain_job = await JobClient(scheduler.channel, "user-p").create()
    plain = ClientRuntime(scheduler.channel, "rt-plain", slots=2)
    await plain.connect()
    try:
        # The older user-key job is skipped for this runtime; the platform-key job is not.
        assert (await plain.next_lease()).job_id == plain_job.job_id
        lock = plain.stub.Lock(
            rt.LockRequest(job_id=keyed.job_id, runtime_instance_id="rt-plain"),
            metadata=plain.metadata,
        )
        assert await _refusal(lock) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
        assert (await job_row(scheduler.app.engine, keyed.job_id))["lifecycleStatus"] == "queued"
    finally:
        await plain.close()
    allowed = ClientRuntime(scheduler.channel, "rt-keys-1", slots=1, token=FLEET_TOKEN)
    await allowed.connect()
    try:
        lease = await allowed.next_lease()
        assert lease.job_id == keyed.job_id
        request = _lease_calls(lease, "rt-keys-1", lease.lease_token)["ResolveCredential"][1]
        reply = await allowed.stub.ResolveCredential(request, metadata=allowed.metadata)
        assert reply.api_key == "sk-user-secret-key"
    finally:
        await allowed.close()

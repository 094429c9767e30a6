"""Bad input to the runtime protocol: a precise status and public code, nothing written, and the
server (and the stream, where one is open) keeps serving."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest

from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output
from shared.canonical_json import output_hash
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.gen.aijob.v1 import runtime_service_pb2_grpc
from shared.status_details import error_reason
from tests.support.db_checks import ARTIFACTS, count, job_row
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql

INVALID = grpc.StatusCode.INVALID_ARGUMENT
VALID_HASH = "0" * 64


async def _expect(call: Awaitable[Any], code: grpc.StatusCode, reason: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    assert caught.value.code() is code, caught.value
    assert error_reason(caught.value) == reason
    assert "Traceback" not in (caught.value.details() or "")


@pytest.fixture
async def leased(scheduler: RunningScheduler) -> AsyncIterator[tuple[ClientRuntime, Any]]:
    runtime = ClientRuntime(scheduler.channel, "rt-a", slots=1)
    await runtime.connect()
    await JobClient(scheduler.channel).create()
    lease = await runtime.next_lease()
    yield runtime, lease
    await runtime.close()


def _submit(lease: Any, **overrides: Any) -> rt.SubmitResultRequest:
    output = {"echo": "x"}
    fields: dict[str, Any] = {
        "job_id": lease.job_id,
        "attempt_no": lease.attempt_no,
        "runtime_instance_id": "rt-a",
        "output_hash": output_hash(output),
        "output_json": json.dumps(output),
        "lease_token": lease.lease_token,
    }
    fields.update(overrides)
    return rt.SubmitResultRequest(**fields)


async def test_bad_submits_are_refused_and_write_nothing(
    scheduler: RunningScheduler, leased: tuple[ClientRuntime, Any]
) -> None:
    runtime, lease = leased
    stub = runtime.stub
    before = await job_row(scheduler.app.engine, lease.job_id)
    big = json.dumps({"echo": "x" * (64 * 1024)})
    cases: list[tuple[rt.SubmitResultRequest, grpc.StatusCode, str]] = [
        (_submit(lease, job_id="no such job!"), INVALID, "INVALID_ARGUMENT"),
        (_submit(lease, job_id=""), INVALID, "INVALID_ARGUMENT"),
        (_submit(lease, job_id="x" * 10_000), INVALID, "INVALID_ARGUMENT"),
        (_submit(lease, job_id="01a2-missing"), grpc.StatusCode.NOT_FOUND, "JOB_NOT_FOUND"),
        (_submit(lease, attempt_no=0), INVALID, "INVALID_ARGUMENT"),
        (_submit(lease, attempt_no=-3), INVALID, "INVALID_ARGUMENT"),
        (_submit(lease, output_hash="ABC"), INVALID, "INVALID_ARGUMENT"),
        (_submit(lease, output_hash="A" * 64), INVALID, "INVALID_ARGUMENT"),
        (_submit(lease, output_hash=VALID_HASH), INVALID, "INVALID_ARGUMENT"),  # mismatch
        (_submit(lease, output_json="{not json"), INVALID, "INVALID_ARGUMENT"),
        (
            _submit(lease, output_json=big, output_hash=output_hash(json.loads(big))),
            INVALID,
            "INVALID_ARGUMENT",
        ),
        (
            _submit(lease, output_json='{"wrong": 1}', output_hash=output_hash({"wrong": 1})),
            INVALID,
            "VALIDATION_FAILED",
        ),
        (
            _submit(lease, runtime_instance_id="rt-other"),
            grpc.StatusCode.FAILED_PRECONDITION,
            "LEASE_LOST",
        ),
        (_submit(lease, attempt_no=2), grpc.StatusCode.FAILED_PRECONDITION, "LEASE_LOST"),
        (_submit(lease, lease_token=""), grpc.StatusCode.FAILED_PRECONDITION, "LEASE_LOST"),
        (_submit(lease, lease_token="forged"), grpc.StatusCode.FAILED_PRECONDITION, "LEASE_LOST"),
    ]
    for request, code, reason in cases:
        await _expect(stub.SubmitResult(request), code, reason)
    assert await job_row(scheduler.app.engine, lease.job_id) == before
    assert await count(scheduler.app.engine, ARTIFACTS, jobId=lease.job_id) == 0
    # The stream and the server are unharmed: the real submit goes through.
    assert (await runtime.submit(lease, echo_output(lease))).duplicate is False


async def test_bad_heartbeats_and_failures(
    scheduler: RunningScheduler, leased: tuple[ClientRuntime, Any]
) -> None:
    runtime, lease = leased
    stub = runtime.stub
    before = await job_row(scheduler.app.engine, lease.job_id)

    def beat(**overrides: Any) -> rt.HeartbeatRequest:
        fields = {
            "job_id": lease.job_id,
            "attempt_no": lease.attempt_no,
            "runtime_instance_id": "rt-a",
            "lease_token": lease.lease_token,
        }
        fields.update(overrides)
        return rt.HeartbeatRequest(**fields)

    failure = FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
    for request, code, reason in [
        (beat(runtime_instance_id="rt-intruder"), FAILED_PRECONDITION, "LEASE_LOST"),
        (beat(attempt_no=7), FAILED_PRECONDITION, "LEASE_LOST"),
        (beat(attempt_no=0), INVALID, "INVALID_ARGUMENT"),
        (beat(progress=101), INVALID, "INVALID_ARGUMENT"),
        (beat(runtime_instance_id=""), INVALID, "INVALID_ARGUMENT"),
        (beat(job_id="../etc/passwd"), INVALID, "INVALID_ARGUMENT"),
        (beat(lease_token=""), FAILED_PRECONDITION, "LEASE_LOST"),
        (beat(lease_token=lease.lease_token + "x"), FAILED_PRECONDITION, "LEASE_LOST"),
    ]:
        await _expect(stub.Heartbeat(request), code, reason)
    bad_failure = rt.SubmitFailureRequest(
        job_id=lease.job_id,
        attempt_no=1,
        runtime_instance_id="rt-a",
        error_code="NOT_A_CODE",
        lease_token=lease.lease_token,
    )
    await _expect(stub.SubmitFailure(bad_failure), INVALID, "INVALID_ARGUMENT")
    foreign = rt.SubmitFailureRequest(
        job_id=lease.job_id,
        attempt_no=1,
        runtime_instance_id="rt-x",
        error_code="NETWORK_ERROR",
        lease_token=lease.lease_token,
    )
    await _expect(stub.SubmitFailure(foreign), failure, "LEASE_LOST")
    tokenless = rt.SubmitFailureRequest(
        job_id=lease.job_id, attempt_no=1, runtime_instance_id="rt-a", error_code="NETWORK_ERROR"
    )
    await _expect(stub.SubmitFailure(tokenless), failure, "LEASE_LOST")
    assert await job_row(scheduler.app.engine, lease.job_id) == before
    assert (await runtime.heartbeat(lease)).cancel_requested is False
    # A client built on the old contract still sends field 5 (the removed checkpoint): it is
    # an unknown field now, accepted and not stored.
    old_client = rt.HeartbeatRequest.FromString(
        beat().SerializeToString() + bytes([5 << 3 | 2, 3]) + b"old"
    )
    assert (await stub.Heartbeat(old_client)).cancel_requested is False
    assert (await job_row(scheduler.app.engine, lease.job_id))["checkpoint"] is None


PollOpener = Callable[[list[rt.PollRequest]], Any]


async def _poll_error(
    scheduler: RunningScheduler, messages: list[rt.PollRequest]
) -> grpc.aio.AioRpcError:
    stub = runtime_service_pb2_grpc.RuntimeServiceStub(scheduler.channel)

    async def requests() -> AsyncIterator[rt.PollRequest]:
        for message in messages:
            yield message

    call = stub.Poll(requests())
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in call:
            pass
    return caught.value


def _subscribe(**overrides: Any) -> rt.PollRequest:
    fields: dict[str, Any] = {
        "runtime_instance_id": "rt-p",
        "job_types": ["synthetic_echo"],
        "slots": 1,
    }
    fields.update(overrides)
    return rt.PollRequest(subscribe=rt.PollSubscribe(**fields))


@pytest.mark.parametrize(
    "messages",
    [
        [rt.PollRequest(credit=rt.PollCredit(slots=1))],
        [_subscribe(slots=0)],
        [_subscribe(slots=-1)],
        [_subscribe(job_types=[])],
        [_subscribe(job_types=["not_registered"])],
        [_subscribe(runtime_instance_id="")],
        [_subscribe(), rt.PollRequest(credit=rt.PollCredit(slots=0))],
        [_subscribe(), _subscribe()],
        [_subscribe(batch_frames=True), rt.PollRequest(report_batch=rt.ReportBatch())],
    ],
    ids=[
        "credit-first",
        "zero-slots",
        "negative-slots",
        "no-job-types",
        "unknown-job-type",
        "no-instance-id",
        "zero-credit",
        "second-subscribe",
        "empty-report-batch",
    ],
)
async def test_bad_poll_streams_are_refused(
    scheduler: RunningScheduler, messages: list[rt.PollRequest]
) -> None:
    error = await _poll_error(scheduler, messages)
    assert error.code() is INVALID
    assert error_reason(error) == "INVALID_ARGUMENT"
    # Other clients are still served.
    job = await JobClient(scheduler.channel).create()
    runtime = ClientRuntime(scheduler.channel, "rt-after", slots=1)
    await runtime.connect()
    try:
        assert (await runtime.next_lease()).job_id == job.job_id
    finally:
        await runtime.close()


async def test_oversized_message_is_refused_cleanly(mysql_url: str, start_scheduler: Any) -> None:
    scheduler = await start_scheduler(mysql_url, max_receive_message_bytes=64 * 1024)
    stub = runtime_service_pb2_grpc.RuntimeServiceStub(scheduler.channel)
    request = rt.SubmitResultRequest(
        job_id="j",
        attempt_no=1,
        runtime_instance_id="rt",
        output_hash=VALID_HASH,
        output_json="x" * 100_000,
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.SubmitResult(request)
    assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    job = await JobClient(scheduler.channel).create()
    assert job.job_id

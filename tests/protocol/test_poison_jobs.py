"""Poison isolation: a job whose input a lease cannot carry stopped its type
for everyone. A 401-digit integer in ``snapshot_json`` was accepted; ``Lock`` answered INTERNAL
after committing the lock, and every Poll stream given the lease ended INTERNAL, in a loop, while
other users' jobs of the same claim stayed queued. Now such input is refused at create, naming
the field; a row that holds it anyway (written by hand or by the legacy system) fails alone at
its claim, and the stream and the rest of the claim carry on. Real MariaDB, real gRPC."""

from __future__ import annotations

import json

import grpc
import pytest
from sqlalchemy import text

from devtools.harness.runtime_client import ClientRuntime, JobClient
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.status_details import error_reason
from tests.support.db_checks import events, job_row
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql

HUGE = "9" * 401
#: Under the create's size limit as JSON, but five times a lease's share as a protobuf Struct
#: (each number a double in a wrapper): a lease carrying it would be larger than a runtime takes.
ZEROS = json.dumps({"text": "x", "n": [0] * 300_000})


async def _refused(jobs: JobClient, field: str, document: str) -> grpc.aio.AioRpcError:
    request = job_pb.CreateJobRequest(job_type="synthetic_echo")
    setattr(request, field, document)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await jobs.stub.CreateJob(request, metadata=jobs.metadata, timeout=30)
    return caught.value


@pytest.mark.parametrize(
    ("field", "document", "reason"),
    [
        ("snapshot_json", f'{{"text": "x", "n": {HUGE}}}', "INVALID_SNAPSHOT"),
        ("params_json", f'{{"n": -{HUGE}}}', "INVALID_PARAMS"),
        ("snapshot_json", '{"text": "x", "n": 9007199254740993}', "INVALID_SNAPSHOT"),
        ("snapshot_json", '{"text": "x", "text": "y"}', "INVALID_SNAPSHOT"),
        ("snapshot_json", ZEROS, "INVALID_SNAPSHOT"),
    ],
)
async def test_input_a_lease_cannot_carry_is_refused_at_create(
    scheduler: RunningScheduler, field: str, document: str, reason: str
) -> None:
    error = await _refused(JobClient(scheduler.channel, "user-p"), field, document)
    assert (error.code(), error_reason(error)) == (grpc.StatusCode.INVALID_ARGUMENT, reason)
    assert field.removesuffix("_json") in (error.details() or "")
    assert len(error.details() or "") < 300  # the 401 digits are not echoed back


async def test_the_largest_exact_integer_is_accepted(scheduler: RunningScheduler) -> None:
    jobs = JobClient(scheduler.channel, "user-p")
    request = job_pb.CreateJobRequest(
        job_type="synthetic_echo", snapshot_json=json.dumps({"text": "x", "n": 2**53})
    )
    reply = await jobs.stub.CreateJob(request, metadata=jobs.metadata, timeout=30)
    assert reply.job.lifecycle_status == "queued"


async def _poison(
    scheduler: RunningScheduler, job_id: str, content: str = f'{{"text": "x", "n": {HUGE}}}'
) -> None:
    """What a row written past CreateJob may hold: a number no lease can carry."""
    async with scheduler.app.engine.begin() as conn:
        await conn.execute(
            text("UPDATE AiJobSnapshot SET content = :c WHERE jobId = :j"),
            {"c": content, "j": job_id},
        )


@pytest.mark.parametrize(
    "content", [f'{{"text": "x", "n": {HUGE}}}', ZEROS], ids=["number", "size"]
)
async def test_a_poison_row_fails_alone_and_its_claim_and_stream_carry_on(
    scheduler: RunningScheduler, content: str
) -> None:
    poison = (await JobClient(scheduler.channel, "user-a").create()).job_id
    await _poison(scheduler, poison, content)
    others = [(await JobClient(scheduler.channel, "user-b").create()).job_id for _ in range(3)]
    runtime = ClientRuntime(scheduler.channel, "rt-poison", slots=4)
    await runtime.connect()
    try:
        leased = {(await runtime.next_lease()).job_id for _ in others}
        assert leased == set(others)
        row = await job_row(scheduler.app.engine, poison)
        assert (row["lifecycleStatus"], row["errorCode"]) == ("failed", "INVALID_SNAPSHOT")
        assert await events(scheduler.app.engine, poison) == ["ai.job.enqueue", "ai.job.failed"]
        # The stream is still open and serves the next job.
        late = (await JobClient(scheduler.channel, "user-b").create()).job_id
        assert (await runtime.next_lease()).job_id == late
    finally:
        await runtime.close()


async def test_lock_of_a_poison_row_fails_that_job_with_its_code(
    scheduler: RunningScheduler,
) -> None:
    poison = (await JobClient(scheduler.channel, "user-a").create()).job_id
    await _poison(scheduler, poison)
    runtime = ClientRuntime(scheduler.channel, "rt-lock")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await runtime.stub.Lock(
            rt.LockRequest(job_id=poison, runtime_instance_id="rt-lock"),
            metadata=runtime.metadata,
            timeout=30,
        )
    assert (caught.value.code(), error_reason(caught.value)) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "INVALID_SNAPSHOT",
    )
    row = await job_row(scheduler.app.engine, poison)
    assert (row["lifecycleStatus"], row["errorCode"]) == ("failed", "INVALID_SNAPSHOT")

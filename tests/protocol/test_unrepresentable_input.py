"""Input that parses but cannot be stored as it is: numbers outside the finite
IEEE-754 range, JSON nested deeper than the database reads, invalid Unicode, odd event ids,
messages that do not parse at all, and sizes at and just past each documented maximum. Every one
answers INVALID_ARGUMENT with its catalogue reason and field before anything is written; the
documented maximum itself is accepted. Real MariaDB, real gRPC."""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest

from devtools.harness.runtime_client import ClientRuntime, JobClient
from devtools.harness.tokens import RUNTIME_TOKEN, bearer
from scheduler_service.core.validation import MAX_JSON_DEPTH
from shared.canonical_json import canonical_json, output_hash
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.status_details import error_reason
from tests.support.db_checks import ARTIFACTS, JOBS, count, job_row
from tests.support.schedulers import RunningScheduler, SchedulerFactory

pytestmark = pytest.mark.mysql

INVALID = grpc.StatusCode.INVALID_ARGUMENT
MAX_OUTPUT = 64 * 1024
MAX_SNAPSHOT = 16 * 1024


def _nested(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


async def _invalid(call: Any, reason: str = "INVALID_ARGUMENT", field: str = "") -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    error = caught.value
    assert (error.code(), error_reason(error)) == (INVALID, reason), error
    assert field in (error.details() or "")
    assert "Traceback" not in (error.details() or "") and "Error" not in (error.details() or "")


def _padded(size: int) -> str:
    """An echo output whose JSON text is exactly ``size`` bytes."""
    bare = json.dumps({"echo": ""})
    return json.dumps({"echo": "x" * (size - len(bare))})


@pytest.fixture
async def limits(mysql_url: str, start_scheduler: SchedulerFactory) -> RunningScheduler:
    return await start_scheduler(
        mysql_url, max_output_bytes=MAX_OUTPUT, max_snapshot_bytes=MAX_SNAPSHOT
    )


async def test_results_that_cannot_be_stored_as_sent_are_refused(limits: RunningScheduler) -> None:
    jobs = JobClient(limits.channel)
    await jobs.create()
    runtime = ClientRuntime(limits.channel, "rt-u", slots=1)
    await runtime.connect()
    try:
        lease = await runtime.next_lease()
        before = await job_row(limits.app.engine, lease.job_id)

        def submit(text: str, digest: str | None = None) -> Any:
            request = rt.SubmitResultRequest(
                job_id=lease.job_id,
                attempt_no=lease.attempt_no,
                runtime_instance_id="rt-u",
                lease_token=lease.lease_token,
                output_json=text,
                output_hash=digest or "0" * 64,
            )
            return runtime.stub.SubmitResult(request, metadata=runtime.metadata)

        too_deep = json.dumps({"echo": _nested(MAX_JSON_DEPTH)})
        for text in (
            '{"echo": NaN}',
            '{"echo": Infinity}',
            '{"echo": -Infinity}',
            '{"echo": 1e400}',
            '{"echo": "\\ud800"}',  # a lone surrogate, escaped: valid JSON text, not Unicode
            '{"\\udfff": 1}',
            too_deep,
            '{"echo": ' + "[" * 100_000 + "]" * 100_000 + "}",
            _padded(MAX_OUTPUT + 1),
        ):
            await _invalid(submit(text), field="output_json")
        assert await job_row(limits.app.engine, lease.job_id) == before
        assert await count(limits.app.engine, ARTIFACTS, jobId=lease.job_id) == 0
        # The documented maxima themselves are accepted.
        deepest = {"echo": _nested(MAX_JSON_DEPTH - 2)}
        assert len(canonical_json(deepest)) < MAX_OUTPUT
        largest = _padded(MAX_OUTPUT)
        assert len(largest.encode()) == MAX_OUTPUT
        await submit(largest, output_hash(json.loads(largest)))
        assert (await job_row(limits.app.engine, lease.job_id))["lifecycleStatus"] == "succeeded"
        jobs_deep = await jobs.create(snapshot={"deep": _nested(MAX_JSON_DEPTH - 1)})
        assert jobs_deep.job_id
    finally:
        await runtime.close()


async def test_snapshots_and_params_that_cannot_be_stored_are_refused(
    limits: RunningScheduler,
) -> None:
    jobs = JobClient(limits.channel)
    before = await count(limits.app.engine, JOBS)
    for value in (float("nan"), float("inf"), float("-inf"), _nested(MAX_JSON_DEPTH)):
        request = job_pb.CreateJobRequest(job_type="synthetic_echo")
        request.snapshot.update({"text": "x", "odd": value})
        await _invalid(
            jobs.stub.CreateJob(request, metadata=jobs.metadata), "INVALID_SNAPSHOT", "snapshot"
        )
        request = job_pb.CreateJobRequest(job_type="synthetic_echo")
        request.snapshot.update({"text": "x"})
        request.params.update({"odd": value})
        await _invalid(
            jobs.stub.CreateJob(request, metadata=jobs.metadata), "INVALID_PARAMS", "params"
        )
    too_big = job_pb.CreateJobRequest(job_type="synthetic_echo")
    too_big.snapshot.update({"text": "x" * MAX_SNAPSHOT})
    await _invalid(
        jobs.stub.CreateJob(too_big, metadata=jobs.metadata), "INVALID_SNAPSHOT", "snapshot"
    )
    assert await count(limits.app.engine, JOBS) == before
    bare = len(canonical_json({"text": ""}))
    exact = {"text": "x" * (MAX_SNAPSHOT - bare)}
    assert len(canonical_json(exact)) == MAX_SNAPSHOT
    assert (await jobs.create(snapshot=exact)).job_id


async def test_odd_event_ids_and_unparseable_messages_are_invalid_arguments(
    limits: RunningScheduler,
) -> None:
    jobs = JobClient(limits.channel)
    for odd in ("²", "١٢٣", "9" * 25, "-1", " 1", "1.5", "0x10", "9223372036854775808"):
        call = jobs.stub.SubscribeEvents(
            job_pb.SubscribeEventsRequest(after_event_id=odd), metadata=jobs.metadata
        )
        await _invalid(_first(call), field="after_event_id")
    # A position beyond the end of the log is refused, not waited on in silence.
    beyond = job_pb.SubscribeEventsRequest(after_event_id="1000000")
    await _invalid(
        _first(jobs.stub.SubscribeEvents(beyond, metadata=jobs.metadata)), field="beyond the end"
    )
    raw = limits.channel.unary_unary(
        "/aijob.v1.JobService/GetJob",
        request_serializer=lambda data: data,
        response_deserializer=lambda data: data,
    )
    for garbage in (b"\xff\xff\xff\xff", b"\x0a\x05ab", b"\x08" + b"\xff" * 11):
        await _invalid(raw(garbage, metadata=jobs.metadata))
    poll = limits.channel.stream_stream(
        "/aijob.v1.RuntimeService/Poll",
        request_serializer=lambda data: data,
        response_deserializer=lambda data: data,
    )
    stream = poll(iter([b"\xff\xff\xff\xff"]), metadata=bearer(RUNTIME_TOKEN))
    await _invalid(_first(stream))


async def _first(call: Any) -> Any:
    async for item in call:
        return item
    return None

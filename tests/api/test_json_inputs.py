"""Snapshots and params as JSON strings: callers that hold JSON send
``snapshot_json`` / ``params_json`` instead of a Struct (one form, not both); a deadline already
past is refused, alone in a bulk create."""

from __future__ import annotations

import datetime
import json
from typing import Any

import grpc
import pytest
from google.protobuf import timestamp_pb2

from devtools.harness.runtime_client import JobClient
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.status_details import error_reason
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql

LEARNING = {"learner": {"id": "l-1"}, "material": {"id": "m-1", "title": "Cells"}}


async def _create(client: JobClient, request: job_pb.CreateJobRequest) -> job_pb.CreateJobResponse:
    reply: job_pb.CreateJobResponse = await client.stub.CreateJob(
        request, metadata=client.metadata, timeout=30
    )
    return reply


async def test_json_strings_create_the_same_job_as_structs(scheduler: RunningScheduler) -> None:
    client = JobClient(scheduler.channel, "json-caller")
    request = job_pb.CreateJobRequest(
        job_type="quiz_generation",
        snapshot_json=json.dumps(LEARNING),
        params_json=json.dumps({"count": 3}),
        idempotency_key="k-json",
    )
    created = await _create(client, request)
    assert created.created
    # The same request as a Struct is the same request (one idempotency key, one job).
    struct = job_pb.CreateJobRequest(job_type="quiz_generation", idempotency_key="k-json")
    struct.snapshot.update(LEARNING)
    struct.params.update({"count": 3})
    again = await _create(client, struct)
    assert (again.created, again.job.job_id) == (False, created.job.job_id)


@pytest.mark.parametrize(
    ("fields", "field", "reason"),
    [
        ({"snapshot_json": '{"learner": {}}'}, "snapshot.learner.id", "INVALID_SNAPSHOT"),
        ({"snapshot_json": "[1, 2]"}, "snapshot_json", "INVALID_SNAPSHOT"),
        ({"snapshot_json": "{not json"}, "snapshot_json", "INVALID_ARGUMENT"),
        (
            {"snapshot_json": json.dumps(LEARNING), "params_json": "3"},
            "params_json",
            "INVALID_PARAMS",
        ),
    ],
)
async def test_bad_json_names_its_field(
    scheduler: RunningScheduler, fields: dict[str, Any], field: str, reason: str
) -> None:
    client = JobClient(scheduler.channel, "json-caller")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _create(client, job_pb.CreateJobRequest(job_type="quiz_generation", **fields))
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error_reason(caught.value) == reason
    assert field in (caught.value.details() or "")


async def test_both_forms_at_once_are_refused(scheduler: RunningScheduler) -> None:
    client = JobClient(scheduler.channel, "json-caller")
    request = job_pb.CreateJobRequest(
        job_type="quiz_generation", snapshot_json=json.dumps(LEARNING)
    )
    request.snapshot.update(LEARNING)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _create(client, request)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "snapshot or snapshot_json, not both" in (caught.value.details() or "")


async def test_a_past_deadline_is_refused_alone_in_a_bulk_create(
    scheduler: RunningScheduler,
) -> None:
    client = JobClient(scheduler.channel, "bulk-caller")
    past = timestamp_pb2.Timestamp()
    past.FromDatetime(datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC))
    items = [
        job_pb.CreateJobsItem(
            job=job_pb.CreateJobRequest(job_type="synthetic_echo", snapshot_json='{"n": 1}')
        ),
        job_pb.CreateJobsItem(
            job=job_pb.CreateJobRequest(
                job_type="synthetic_echo", snapshot_json='{"n": 2}', deadline=past
            )
        ),
    ]
    reply = await client.stub.CreateJobs(
        job_pb.CreateJobsRequest(items=items), metadata=client.metadata, timeout=30
    )
    good, late = reply.results
    assert good.status.code == 0 and good.created
    assert late.status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "deadline is in the past" in late.status.message

"""One field, one caller, one disconnect: a ``credential_id`` of 256+
characters answered INTERNAL (MariaDB 1406 "Data too long"), failed a whole CreateJobs call (0 of
10 valid items written) and logged a traceback per call; every Poll disconnect logged an ERROR
line. Real MariaDB, real gRPC."""

from __future__ import annotations

import logging

import grpc
import pytest
from google.protobuf import json_format

from devtools.harness.runtime_client import ClientRuntime, JobClient
from devtools.harness.waiting import eventually
from scheduler_service.api import status
from scheduler_service.core.log_throttle import LogThrottle
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.status_details import status_reason
from tests.support.db_checks import JOBS, count
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql


def _item(credential_id: str = "") -> job_pb.CreateJobsItem:
    job = job_pb.CreateJobRequest(job_type="synthetic_echo")
    if credential_id:
        job.credential_mode, job.credential_id = "user_deepseek_key", credential_id
    json_format.ParseDict({"text": "hello"}, job.snapshot)
    return job_pb.CreateJobsItem(job=job)


async def test_an_overlong_credential_id_fails_its_item_alone(
    scheduler: RunningScheduler, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    jobs = JobClient(scheduler.channel, "user-long")
    items = [_item() for _ in range(10)]
    items.insert(4, _item(credential_id="c" * 300))
    reply = await jobs.stub.CreateJobs(
        job_pb.CreateJobsRequest(items=items), metadata=jobs.metadata, timeout=60
    )
    bad = reply.results[4]
    assert (bad.status.code, status_reason(bad.status)) == (
        grpc.StatusCode.INVALID_ARGUMENT.value[0],
        "INVALID_ARGUMENT",
    )
    assert "credential_id" in bad.status.message
    assert sum(r.status.code == 0 for r in reply.results) == 10
    assert await count(scheduler.app.engine, JOBS, userId="user-long") == 10
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_disconnecting_poll_streams_log_no_errors(
    scheduler: RunningScheduler, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    for n in range(5):
        runtime = ClientRuntime(scheduler.channel, f"rt-bye-{n}", slots=1)
        await runtime.connect()

        name = f"rt-bye-{n}"

        async def subscribed(name: str = name) -> bool:
            return name in scheduler.app.dispatcher.subscribed()

        async def gone(name: str = name) -> bool:
            return name not in scheduler.app.dispatcher.subscribed()

        await eventually(subscribed)
        runtime._call.cancel()  # the runtime vanishes mid-stream
        await eventually(gone)
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_an_unexpected_error_repeated_in_a_loop_logs_one_line_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="scheduler_service.api.status")
    clock = [0.0]
    throttle = LogThrottle(10.0, lambda: clock[0])
    status._UNEXPECTED, saved = throttle, status._UNEXPECTED
    try:
        for _ in range(500):  # 5 s of a bad call repeated every 10 ms
            code, _ = status.status_of(KeyError("boom"), "/aijob.v1.JobService/CreateJob")
            assert code is grpc.StatusCode.INTERNAL
            clock[0] += 0.01
    finally:
        status._UNEXPECTED = saved
    assert len(caplog.records) == 1

"""WatchJob and SubscribeEvents streams are capped per token: over the cap a new stream
is refused RESOURCE_EXHAUSTED (TOO_MANY_STREAMS); another token's streams count apart, and a
closed stream gives its place back."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from devtools.harness import tokens
from devtools.harness.runtime_client import JobClient
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.status_details import error_reason
from tests.support.schedulers import SchedulerFactory

pytestmark = pytest.mark.mysql


async def _message(call: Any) -> Any:
    """The next message of a stream (the stubs type it as object)."""
    return await call.read()


async def _refused(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call.read()
    return caught.value.code(), error_reason(caught.value)


async def test_watch_and_subscribe_streams_are_capped_per_token(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(
        mysql_url,
        max_watch_streams_per_token=2,
        max_subscribe_streams_per_token=1,
        service_tokens=f"{tokens.SERVICE_TOKEN},other-service-token",
    )
    mine, theirs = (
        JobClient(scheduler.channel),
        JobClient(scheduler.channel, token="other-service-token"),
    )
    job = await mine.create()
    other_job = await theirs.create()
    watch = job_pb.WatchJobRequest(job_id=job.job_id)
    held = [mine.stub.WatchJob(watch, metadata=mine.metadata) for _ in range(2)]
    try:
        for call in held:
            assert (await _message(call)).job_id == job.job_id
        over = mine.stub.WatchJob(watch, metadata=mine.metadata)
        too_many = (grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_STREAMS")
        assert await _refused(over) == too_many
        other = theirs.stub.WatchJob(
            job_pb.WatchJobRequest(job_id=other_job.job_id), metadata=theirs.metadata
        )
        assert (await _message(other)).job_id == other_job.job_id
        other.cancel()

        subscribe = job_pb.SubscribeEventsRequest(
            after_event_id="0", event_types=["ai.job.enqueue"]
        )
        first = mine.stub.SubscribeEvents(subscribe, metadata=mine.metadata)
        assert (await _message(first)).event_type == "ai.job.enqueue"
        assert await _refused(mine.stub.SubscribeEvents(subscribe, metadata=mine.metadata)) == (
            too_many
        )
        first.cancel()
        # A stream that ends gives its place back: cancelling the watched job ends both held
        # streams on the server's side (the place is freed before the client sees the end).
        await mine.cancel(job.job_id)
        for call in held:
            assert (await _message(call)).lifecycle_status == "cancelled"
            assert await call.read() is grpc.aio.EOF  # type: ignore[attr-defined]
        again = mine.stub.WatchJob(
            job_pb.WatchJobRequest(job_id=(await mine.create()).job_id), metadata=mine.metadata
        )
        assert (await _message(again)).lifecycle_status == "queued"
        again.cancel()
    finally:
        for call in held:
            call.cancel()

"""Callers without a token, each sending one message of nearly 4 MiB at once: run as its own
process (``python -m devtools.harness.anonymous_flood ADDRESS KIND``) so that the flood's own
sending costs nothing to the authenticated caller measured beside it. Prints one JSON object,
each status code's name and how many senders ended with it."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from collections.abc import Awaitable, Callable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import job_service_pb2_grpc

SENDERS = 300
CHANNELS = 30
MESSAGE_BYTES = 4 * 1024 * 1024 - 1024

Sender = Callable[[grpc.aio.Channel], Awaitable[grpc.StatusCode]]


async def _get_job(channel: grpc.aio.Channel) -> grpc.StatusCode:
    """A JobService call, which needs a token: refused before its message is read."""
    stub = job_service_pb2_grpc.JobServiceStub(channel)
    request = job_pb.GetJobRequest(job_id="x" * MESSAGE_BYTES)
    try:
        await stub.GetJob(request, timeout=120)
    except grpc.aio.AioRpcError as refused:
        return refused.code()
    return grpc.StatusCode.OK


async def _health(channel: grpc.aio.Channel) -> grpc.StatusCode:
    """A health check, which needs no token: its message is read."""
    stub = health_pb2_grpc.HealthStub(channel)
    request = health_pb2.HealthCheckRequest(service="x" * MESSAGE_BYTES)
    try:
        await stub.Check(request, timeout=120)
    except grpc.aio.AioRpcError as refused:
        return refused.code()
    return grpc.StatusCode.OK


SENDERS_BY_KIND: dict[str, Sender] = {"get_job": _get_job, "health": _health}


async def flood(address: str, send: Sender) -> Counter[str]:
    options = [("grpc.max_send_message_length", 8 * 1024 * 1024)]
    channels = [grpc.aio.insecure_channel(address, options=options) for _ in range(CHANNELS)]
    try:
        codes = await asyncio.gather(*(send(channels[i % CHANNELS]) for i in range(SENDERS)))
    finally:
        for channel in channels:
            await channel.close(None)
    return Counter(code.name for code in codes)


def main() -> None:
    address, kind = sys.argv[1:3]
    print(json.dumps(asyncio.run(flood(address, SENDERS_BY_KIND[kind]))))


if __name__ == "__main__":
    main()

"""The protocol floor: the drain's gRPC exchange alone, with a server that answers at once.

The same benchmark runtimes as ``bench.throughput`` (4 x 32 slots, generated stubs, results on
the stream, a credit per job) against a Poll servicer in a child process that has no database and
no logic: each subscribe or credit is answered with leases at once, each report with its ack. What
it measures is what one job's exchange (lease, report, ack, credit) costs in grpc.aio on this
machine, on both sides: the upper bound of any drain built on this protocol here, before a single
statement runs. Measured twice: with batched frames (``grpc_floor_*``, what our runtimes speak)
and with a message per lease, report, ack and credit (``grpc_floor_single_*``).

    python -m bench.protocol_floor      # AIJOB_BENCH_FLOOR_JOBS (default 20000)
"""

from __future__ import annotations

import asyncio
import multiprocessing
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import psutil

from bench.sizes import size
from devtools.harness.runtime_client import ClientRuntime, echo_output, working
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.gen.aijob.v1 import runtime_service_pb2_grpc, types_pb2

JOBS = size("FLOOR_JOBS", 20_000, 500)
RUNTIMES, SLOTS = 4, 32


class _InstantPoll(runtime_service_pb2_grpc.RuntimeServiceServicer):
    """Leases for every free slot, an ack for every report; nothing else."""

    def __init__(self) -> None:
        self._issued = 0

    def _lease(self) -> types_pb2.Lease:
        self._issued += 1
        lease = types_pb2.Lease(
            job_id=f"{self._issued:032x}",
            job_type="synthetic_echo",
            attempt_no=1,
            lease_token="t" * 32,
        )
        lease.snapshot.update({"i": self._issued})
        return lease

    def _leases(self, count: int, batch: bool) -> list[rt.PollResponse]:
        leases = [self._lease() for _ in range(count)]
        if batch:
            return [rt.PollResponse(lease_batch=rt.LeaseBatch(leases=leases))]
        return [rt.PollResponse(lease=lease) for lease in leases]

    async def Poll(
        self, request_iterator: AsyncIterator[rt.PollRequest], context: Any
    ) -> AsyncIterator[rt.PollResponse]:
        batch = False
        async for request in request_iterator:
            kind = request.WhichOneof("kind")
            if kind == "subscribe":
                batch = request.subscribe.batch_frames
                for response in self._leases(request.subscribe.slots, batch):
                    yield response
            elif kind == "credit":
                for response in self._leases(request.credit.slots, batch):
                    yield response
            elif kind == "report":
                yield rt.PollResponse(ack=_ack(request.report))
            elif kind == "report_batch":
                acks = [_ack(report) for report in request.report_batch.reports]
                yield rt.PollResponse(ack_batch=rt.AckBatch(acks=acks))


def _ack(report: rt.PollReport) -> rt.ReportAck:
    return rt.ReportAck(report_id=report.report_id, result=rt.SubmitResultResponse())


def _serve(port: int) -> None:
    async def run() -> None:
        server = grpc.aio.server()
        # Only Poll is served; the other methods answer UNIMPLEMENTED, as the base class does.
        servicer = _InstantPoll()  # type: ignore[abstract]
        runtime_service_pb2_grpc.add_RuntimeServiceServicer_to_server(servicer, server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        await server.wait_for_termination()

    asyncio.run(run())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _drain(
    address: str, server: psutil.Process, jobs: int, *, batch_frames: bool
) -> dict[str, float]:
    channel = grpc.aio.insecure_channel(address)
    await asyncio.wait_for(channel.channel_ready(), 30)
    runtimes = [
        ClientRuntime(channel, f"floor-{r}", slots=SLOTS, batch_frames=batch_frames)
        for r in range(RUNTIMES)
    ]
    done = asyncio.Event()
    finished = 0

    async def finish(runtime: ClientRuntime, lease: types_pb2.Lease) -> None:
        nonlocal finished
        ack = await runtime.submit_on_stream(lease, echo_output(lease))
        assert ack.status.code == 0, ack.status
        finished += 1
        if finished == jobs:
            done.set()

    me = psutil.Process()
    client_before, server_before = me.cpu_times(), server.cpu_times()
    started = time.perf_counter()
    try:
        # The server leases past ``jobs``: the reports still waiting when the count is reached
        # are cancelled with the workers, before the server goes.
        async with working(runtimes, finish):
            await asyncio.wait_for(done.wait(), timeout=600)
            elapsed = time.perf_counter() - started
            client_after, server_after = me.cpu_times(), server.cpu_times()
    finally:
        await channel.close(None)

    def busy(before: Any, after: Any) -> float:
        return float(after.user + after.system - before.user - before.system)

    prefix = "grpc_floor" if batch_frames else "grpc_floor_single"
    return {
        f"{prefix}_jobs_per_s": jobs / elapsed,
        f"{prefix}_client_us_per_job": 1e6 * busy(client_before, client_after) / jobs,
        f"{prefix}_server_us_per_job": 1e6 * busy(server_before, server_after) / jobs,
    }


async def main(jobs: int = JOBS) -> dict[str, float]:
    port = _free_port()
    process = multiprocessing.get_context("spawn").Process(target=_serve, args=(port,))
    process.start()
    try:
        assert process.pid is not None
        server = psutil.Process(process.pid)
        address = f"127.0.0.1:{port}"
        figures = await _drain(address, server, jobs, batch_frames=True)
        figures |= await _drain(address, server, jobs, batch_frames=False)
    finally:
        process.kill()
        process.join()
    print(f"\nprotocol floor, {jobs} jobs, {RUNTIMES}x{SLOTS}, no database\n")
    for prefix, name in (("grpc_floor", "batched frames"), ("grpc_floor_single", "single")):
        print(f"{'gRPC exchange alone, ' + name:44} {figures[prefix + '_jobs_per_s']:10.0f} jobs/s")
        print(
            f"{'  benchmark runtimes CPU':44} {figures[prefix + '_client_us_per_job']:10.0f} us/job"
        )
        print(f"{'  instant server CPU':44} {figures[prefix + '_server_us_per_job']:10.0f} us/job")
    return figures


if __name__ == "__main__":
    asyncio.run(main())

"""Several scheduler processes on one address, and only on purpose.

A second scheduler on a busy address exits non-zero and says why (gRPC's default port reuse used
to let it bind silently and take half the calls). ``AIJOB_WORKERS=2`` serves one port from two
processes, both take calls, and a drain through it finishes every job once."""

from __future__ import annotations

import asyncio
import subprocess
import urllib.request
from collections import Counter
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devtools.harness.procs import (
    free_port,
    free_ports_in_a_row,
    launch_scheduler,
    wait_until_serving,
)
from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output, working
from devtools.harness.waiting import eventually
from shared.gen.aijob.v1 import types_pb2
from tests.support.ledger import assert_every_job_once, read_ledger, wait_until_published

pytestmark = [pytest.mark.mysql, pytest.mark.slow]

JOBS_TOTAL = 400
#: New connections opened until both workers have answered one; the kernel spreads them by a
#: hash, so each misses a given worker with probability 1/2: 200 all missing is 2^-200.
MAX_PROBES = 200


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.terminate()
    return proc.wait(timeout=60)


def test_a_second_scheduler_on_a_busy_address_exits_and_says_why(
    mysql_url: str, tmp_path: Path
) -> None:
    address = f"127.0.0.1:{free_port()}"
    first = launch_scheduler(mysql_url, address, tmp_path / "first.log")
    try:
        wait_until_serving(address)
        second = launch_scheduler(mysql_url, address, tmp_path / "second.log")
        assert second.wait(timeout=60) == 2
        said = (tmp_path / "second.log").read_text()
        assert "cannot listen on" in said and "in use" in said and "Traceback" not in said
        workers = launch_scheduler(mysql_url, address, tmp_path / "workers.log", AIJOB_WORKERS="2")
        assert workers.wait(timeout=60) == 2  # the workers' parent checks first, too
    finally:
        assert _stop(first) == 0


async def _metrics_up(metrics_port: int) -> bool:
    try:
        await asyncio.to_thread(_served_checks, metrics_port)
    except OSError:  # refused: that worker has not bound its endpoint yet
        return False
    return True


def _served_checks(metrics_port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("aijob_rpc_total{") and 'method="Check"' in line
    )


async def test_two_workers_share_one_port_and_drain_every_job_once(
    mysql_url: str, tmp_path: Path
) -> None:
    # Each worker serves metrics on its own port: the base and the next.
    address, metrics = f"127.0.0.1:{free_port()}", free_ports_in_a_row(2)
    proc = launch_scheduler(
        mysql_url,
        address,
        tmp_path / "workers.log",
        AIJOB_WORKERS="2",
        AIJOB_METRICS_LISTEN=f"127.0.0.1:{metrics}",
    )
    channels: list[grpc.aio.Channel] = []
    try:
        wait_until_serving(address)
        # Serving is the first worker's word: wait for both workers' metrics before probing
        # which of them takes connections.
        await eventually(lambda: _metrics_up(metrics))
        await eventually(lambda: _metrics_up(metrics + 1))
        for _ in range(MAX_PROBES):
            # A connection of its own (grpc shares subchannels between channels by default).
            channel = grpc.aio.insecure_channel(
                address, options=[("grpc.use_local_subchannel_pool", 1)]
            )
            channels.append(channel)
            await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=30, wait_for_ready=True
            )
            if _served_checks(metrics) and _served_checks(metrics + 1):
                break
        assert _served_checks(metrics) and _served_checks(metrics + 1), "one worker took nothing"

        runtimes = [
            ClientRuntime(channels[i % len(channels)], f"rt-w-{i}", slots=16) for i in range(4)
        ]
        finished, all_done = 0, asyncio.Event()

        async def finish(runtime: ClientRuntime, lease: types_pb2.Lease) -> None:
            nonlocal finished
            await runtime.submit(lease, echo_output(lease))
            finished += 1
            if finished == JOBS_TOTAL:
                all_done.set()

        clients = [JobClient(channels[i % len(channels)], f"user-{i}") for i in range(8)]
        async with working(runtimes, finish):
            for index in range(JOBS_TOTAL):
                await clients[index % len(clients)].create(snapshot={"index": index})
            await asyncio.wait_for(all_done.wait(), timeout=300)
        leased = Counter(pair for runtime in runtimes for pair in runtime.received)
        assert len(leased) == JOBS_TOTAL and max(leased.values()) == 1
        # The chaos ledger's checks: every job succeeded once, one artifact set from its last
        # attempt, every event published once at its own position.
        await wait_until_published(mysql_url, 2 * JOBS_TOTAL)
        assert_every_job_once(await read_ledger(mysql_url), JOBS_TOTAL)
    finally:
        for channel in channels:
            await channel.close(None)
        assert _stop(proc) == 0

"""Two scheduler replicas with real runtime processes under faults (S19, and S1/S7 at scale):
one replica SIGKILLed in the middle of a 2,000-job drain, and a rolling restart of both.

Afterwards every job succeeded once, with one artifact set from its last attempt, and every
outbox event was published once, at its own position, with no gap.
"""

from __future__ import annotations

import asyncio
import re
import urllib.request
from pathlib import Path

import grpc
import pytest

from devtools.harness.procs import free_port
from devtools.harness.runtime_client import JobClient
from tests.support.ledger import (
    assert_every_job_once,
    read_ledger,
    wait_until_published,
    wait_until_succeeded,
)
from tests.support.replicas import Replica
from tests.support.runtime_procs import Launcher

pytestmark = pytest.mark.mysql


async def _create(replicas: list[Replica], total: int) -> None:
    channels = [grpc.aio.insecure_channel(r.address) for r in replicas]
    clients = [JobClient(channels[u % 2], user_id=f"user-{u}") for u in range(64)]
    semaphore = asyncio.Semaphore(32)

    async def create(index: int) -> None:
        async with semaphore:
            await clients[index % len(clients)].create(snapshot={"index": index})

    try:
        await asyncio.gather(*(create(i) for i in range(total)))
    finally:
        for channel in channels:
            await channel.close(None)


def _runtimes(launch: Launcher, replicas: list[Replica]) -> None:
    # Batched frames said out loud, though it is the runtime's default: acks in
    # flight are frames of many acks, and a killed replica loses whole frames of them.
    for index in range(4):
        launch(
            replicas[index % 2].address,
            f"rt-{index}",
            AIJOB_RUNTIME_SLOTS="8",
            AIJOB_STREAM_BATCH_FRAMES="true",
        )


async def test_a_replica_killed_mid_drain_loses_nothing(
    replicas: list[Replica], launch: Launcher, mysql_url: str
) -> None:
    total = 2_000
    await _create(replicas, total)
    _runtimes(launch, replicas)
    await wait_until_succeeded(mysql_url, total // 4)
    replicas[0].kill()
    # The other replica keeps draining while this one is dead; its runtimes keep reconnecting.
    await wait_until_succeeded(mysql_url, total // 2)
    replicas[0].start()
    await wait_until_succeeded(mysql_url, total)
    await wait_until_published(mysql_url, 2 * total)
    assert_every_job_once(await read_ledger(mysql_url), total)


async def test_a_rolling_restart_of_both_replicas_loses_nothing(
    replicas: list[Replica], launch: Launcher, mysql_url: str
) -> None:
    total = 1_000
    await _create(replicas, total)
    _runtimes(launch, replicas)
    for step, replica in enumerate(replicas, start=1):
        await wait_until_succeeded(mysql_url, total * step // 3)
        replica.stop()
        replica.start()
    await wait_until_succeeded(mysql_url, total)
    await wait_until_published(mysql_url, 2 * total)
    assert_every_job_once(await read_ledger(mysql_url), total)


async def test_a_replica_killed_with_acks_in_flight_loses_nothing(
    mysql_url: str, tmp_path: Path, launch: Launcher
) -> None:
    """The replica holds every committed batch's acks for 2 s (fault injection) and is killed
    while results it committed are still unacknowledged: the runtimes repeat those reports as
    unary calls once it is back (answered as duplicates), and the ledger is whole."""
    total = 400
    stalling = Replica(mysql_url, tmp_path, "stalling")
    stalling.start_with(AIJOB_TEST_FAULT_REPORT_STALL_MS="2000")
    try:
        await _create([stalling, stalling], total)
        for index in range(2):
            launch(stalling.address, f"rt-acks-{index}", AIJOB_RUNTIME_SLOTS="8")
        # Results are committed and then held back 2 s: once some have committed, acks are in
        # flight until at least then.
        await wait_until_succeeded(mysql_url, total // 4)
        stalling.kill()
        metrics = f"127.0.0.1:{free_port()}"
        stalling.start_with(AIJOB_METRICS_LISTEN=metrics)  # without the fault
        await wait_until_succeeded(mysql_url, total)
        await wait_until_published(mysql_url, 2 * total)
        assert_every_job_once(await read_ledger(mysql_url), total)
        # The reports whose acks died with the replica came back as unary calls.
        assert _unary_results(metrics) >= 1
    finally:
        if stalling.process is not None and stalling.process.poll() is None:
            stalling.stop()


def _unary_results(metrics_address: str) -> float:
    with urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=10) as response:
        body = response.read().decode()
    found = re.search(
        r'^aijob_rpc_total\{code="OK",method="SubmitResult"\} ([0-9.e+]+)$', body, re.M
    )
    return float(found.group(1)) if found else 0.0

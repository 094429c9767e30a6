"""A scheduler SIGKILLed between claiming an outbox event and publishing it: after a restart the
event is published within the processing timeout plus one dispatcher interval (database time)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import cast

import grpc
import pytest
from sqlalchemy import select

from devtools.harness.procs import free_port, launch_scheduler, wait_until_serving
from devtools.harness.runtime_client import JobClient
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.engine import create_engine
from tests.support.db_checks import OUTBOX

pytestmark = pytest.mark.mysql

PROCESSING_TIMEOUT_S = 2
INTERVAL_MS = 200


def _start(url: str, address: str, log: Path, **env: str) -> subprocess.Popen[bytes]:
    return launch_scheduler(
        url,
        address,
        log,
        AIJOB_OUTBOX_PROCESSING_TIMEOUT_S=str(PROCESSING_TIMEOUT_S),
        AIJOB_OUTBOX_INTERVAL_MS=str(INTERVAL_MS),
        **env,
    )


async def _event(url: str) -> dict[str, object]:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            row = (await conn.execute(select(OUTBOX, db_now().label("now")))).one()
            return dict(row._mapping)
    finally:
        await engine.dispose()


async def _wait_for(url: str, status: str, deadline_s: float = 60) -> dict[str, object]:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        event = await _event(url)
        if event["status"] == status:
            return event
        await asyncio.sleep(0.05)  # polling the database for a state, bounded by the deadline
    raise AssertionError(f"the event never became {status}: {event}")


async def test_killed_between_claim_and_publish(mysql_url: str, tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    # This scheduler claims events and then stalls before delivering them (fault injection).
    stalled = _start(
        mysql_url, address, tmp_path / "a.log", AIJOB_TEST_FAULT_OUTBOX_STALL_MS="600000"
    )
    try:
        wait_until_serving(address)
        async with grpc.aio.insecure_channel(address) as channel:
            await JobClient(channel).create()
        claimed = await _wait_for(mysql_url, "processing")
    finally:
        stalled.send_signal(signal.SIGKILL)
        stalled.wait(timeout=30)
    assert claimed["lockedBy"]

    restarted = _start(mysql_url, address, tmp_path / "b.log")
    try:
        wait_until_serving(address)
        ready = (await _event(mysql_url))["now"]
        published = await _wait_for(mysql_url, "published")
    finally:
        restarted.terminate()
        assert restarted.wait(timeout=30) == 0
    assert published["attemptCount"] == 0
    locked_at, published_at = (
        cast(datetime, claimed["lockedAt"]),
        cast(datetime, published["publishedAt"]),
    )
    reclaimable_at = max(locked_at + timedelta(seconds=PROCESSING_TIMEOUT_S), cast(datetime, ready))
    # One interval to notice, plus a little for the round itself.
    assert published_at - reclaimable_at <= timedelta(milliseconds=INTERVAL_MS + 500)

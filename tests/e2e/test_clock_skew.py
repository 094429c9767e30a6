"""Clock skew (reliability S8): a scheduler process whose clock runs 5 minutes ahead and a
runtime process whose clock runs 10 minutes behind change nothing, because every lease and
deadline is computed and compared on the database's clock.

The skew is real for the whole child process: libfaketime (LD_PRELOAD) moves its realtime
clock, for Python and the gRPC core alike; the log timestamps show it took effect. Jobs run for
longer than a lease, so each one lives on heartbeats: a lease judged on either process's own
clock would be reaped at once (scheduler ahead) or look 10 minutes stale (runtime behind).
"""

from __future__ import annotations

import importlib.util
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
from sqlalchemy import select

from devtools.harness.procs import free_port, launch_scheduler, wait_until_serving
from devtools.harness.runtime_client import JobClient
from devtools.harness.waiting import eventually
from devtools.scripted_model import ScriptedModelServer
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.engine import create_engine
from tests.support.db_checks import JOBS
from tests.support.ledger import read_ledger
from tests.support.runtime_procs import Launcher

pytestmark = pytest.mark.mysql

_PACKAGE = importlib.util.find_spec("libfaketime")
assert _PACKAGE is not None and _PACKAGE.origin, "libfaketime is a dev dependency"
LIBFAKETIME = Path(_PACKAGE.origin).parent / "vendor/libfaketime/src/libfaketime.so.1"
SCHEDULER_AHEAD_S, RUNTIME_BEHIND_S = 300, -600
JOBS_TOTAL = 4


def _skewed(seconds: int) -> dict[str, str]:
    """The environment that starts a child with its realtime clock ``seconds`` off."""
    preload = os.pathsep.join(p for p in (str(LIBFAKETIME), os.environ.get("LD_PRELOAD")) if p)
    return {
        "LD_PRELOAD": preload,
        "FAKETIME": f"{seconds:+d}",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "FAKETIME_NO_CACHE": "1",
    }


def _log_skew_s(log: Path) -> float:
    """How far the newest timestamp in a JSON log is from the real clock now."""
    stamps = [
        json.loads(line)["ts"] for line in log.read_text().splitlines() if line.startswith("{")
    ]
    return (datetime.fromisoformat(stamps[-1]) - datetime.now(UTC)).total_seconds()


async def test_skewed_scheduler_and_runtime_clocks_change_nothing(
    mysql_url: str, launch: Launcher, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    address = f"127.0.0.1:{free_port()}"
    scheduler = launch_scheduler(
        mysql_url,
        address,
        tmp_path / "scheduler.log",
        AIJOB_LEASE_TTL_S="3",
        AIJOB_LEASE_GRACE_S="1",
        AIJOB_REAPER_INTERVAL_S="0.1",
        **_skewed(SCHEDULER_AHEAD_S),
    )
    try:
        wait_until_serving(address)
        model_server.state.default_fault = "latency:6000"  # twice the lease
        launch(
            address,
            "rt-behind",
            AIJOB_RUNTIME_SLOTS=str(JOBS_TOTAL),
            AIJOB_HEARTBEAT_S="0.5",
            **_skewed(RUNTIME_BEHIND_S),
        )
        async with grpc.aio.insecure_channel(address) as channel:
            jobs = JobClient(channel)
            created = [await jobs.create(snapshot={"index": i}) for i in range(JOBS_TOTAL)]

        async def all_succeeded() -> bool:
            ledger = await read_ledger(mysql_url)
            return ledger.statuses == {"succeeded": JOBS_TOTAL}

        await eventually(all_succeeded, within_s=60, every_s=0.1)
    finally:
        scheduler.terminate()
        assert scheduler.wait(timeout=60) == 0

    ledger = await read_ledger(mysql_url)
    assert ledger.artifacts_of_other_attempts == 0 and ledger.artifact_rows == JOBS_TOTAL
    rows = await _attempts_and_finish(mysql_url, [job.job_id for job in created])
    assert all(attempts == 1 for attempts, _ in rows), "a healthy lease was taken back"
    # Every stamp in the rows is the database's: minutes away from both skewed clocks.
    db_time = await _db_time(mysql_url)
    assert all(abs((db_time - finished).total_seconds()) < 60 for _, finished in rows)
    assert _log_skew_s(tmp_path / "scheduler.log") == pytest.approx(SCHEDULER_AHEAD_S, abs=30)
    assert _log_skew_s(tmp_path / "rt-behind.log") == pytest.approx(RUNTIME_BEHIND_S, abs=30)


async def _attempts_and_finish(url: str, job_ids: list[str]) -> list[tuple[int, datetime]]:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            query = select(JOBS.c.attemptCount, JOBS.c.finishedAt).where(JOBS.c.id.in_(job_ids))
            return [(int(a), f) for a, f in (await conn.execute(query)).all()]
    finally:
        await engine.dispose()


async def _db_time(url: str) -> datetime:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            return (await conn.execute(select(db_now()))).scalar_one()
    finally:
        await engine.dispose()

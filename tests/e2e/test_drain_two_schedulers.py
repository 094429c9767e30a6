"""8 runtimes across 2 scheduler processes on one MariaDB drain 2,000 synthetic_echo jobs.

The schedulers are real child processes (`python -m scheduler_service`); the runtimes are built on
the generated client. Afterwards: every job succeeded exactly once, no attempt was leased twice,
nothing is left non-terminal, and every success has its one artifact and one outbox event.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest
from sqlalchemy import func, select

from devtools.harness.procs import scheduler_processes
from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output, working
from scheduler_service.sql.db.engine import create_engine
from shared.gen.aijob.v1 import types_pb2
from tests.support.db_checks import ARTIFACTS, JOBS, OUTBOX

pytestmark = pytest.mark.mysql

JOBS_TOTAL = 2_000
RUNTIMES_PER_SCHEDULER = 4
SLOTS = 16


@pytest.fixture
def two_schedulers(mysql_url: str, tmp_path: Path) -> Iterator[list[str]]:
    # Each user creates 1,000 jobs while they drain: how far the creates run ahead of the drain
    # depends on the machine's load, and the per-user cap of active jobs is not this test's
    # subject (tests/api/test_job_api.py has it), so it is out of the way.
    cap = {"AIJOB_MAX_ACTIVE_JOBS_PER_USER": str(JOBS_TOTAL)}
    with scheduler_processes(mysql_url, 2, log_dir=tmp_path, env=cap) as addresses:
        yield addresses


@pytest.fixture
async def channels(two_schedulers: list[str]) -> AsyncIterator[list[grpc.aio.Channel]]:
    opened = [grpc.aio.insecure_channel(address) for address in two_schedulers]
    yield opened
    for channel in opened:
        await channel.close(None)


async def test_two_schedulers_eight_runtimes_drain_every_job_once(
    channels: list[grpc.aio.Channel], mysql_url: str
) -> None:
    runtimes = [
        ClientRuntime(channel, f"rt-{s}-{r}", slots=SLOTS)
        for s, channel in enumerate(channels)
        for r in range(RUNTIMES_PER_SCHEDULER)
    ]
    finished = 0
    all_done = asyncio.Event()

    async def finish(runtime: ClientRuntime, lease: types_pb2.Lease) -> None:
        nonlocal finished
        await runtime.submit(lease, echo_output(lease))
        finished += 1
        if finished == JOBS_TOTAL:
            all_done.set()

    clients = [JobClient(channel, user_id=f"user-{i}") for i, channel in enumerate(channels)]
    semaphore = asyncio.Semaphore(32)

    async def create(index: int) -> str:
        async with semaphore:
            job = await clients[index % 2].create(snapshot={"index": index})
            return job.job_id

    # Creates one by one while the runtimes already drain (the bulk create is another test's).
    async with working(runtimes, finish):
        created = await asyncio.gather(*(create(i) for i in range(JOBS_TOTAL)))
        await asyncio.wait_for(all_done.wait(), timeout=300)

    leased = Counter(pair for runtime in runtimes for pair in runtime.received)
    assert len(leased) == JOBS_TOTAL
    assert max(leased.values()) == 1, "an attempt was leased twice"
    assert {job_id for job_id, _ in leased} == set(created)
    per_scheduler = Counter(r.instance_id.split("-")[1] for r in runtimes for _ in r.received)
    assert set(per_scheduler) == {"0", "1"}, "both schedulers dispatched work"

    statuses, artifacts, artifact_rows, completed = await _tallies(mysql_url)
    assert statuses == {"succeeded": JOBS_TOTAL}
    assert artifacts == artifact_rows == JOBS_TOTAL
    assert completed == JOBS_TOTAL


async def _tallies(url: str) -> tuple[dict[str, int], int, int, int]:
    """Jobs by status, jobs with artifacts, artifact rows, completed events."""
    engine = create_engine(url, pool_size=2)
    try:
        async with engine.connect() as conn:
            by_status = select(JOBS.c.lifecycleStatus, func.count()).group_by(
                JOBS.c.lifecycleStatus
            )
            statuses = {str(s): int(n) for s, n in (await conn.execute(by_status)).all()}
            with_artifacts = select(func.count(func.distinct(ARTIFACTS.c.jobId)))
            artifact_rows = select(func.count()).select_from(ARTIFACTS)
            completed = select(func.count()).where(OUTBOX.c.eventType == "ai.job.completed")
            return (
                statuses,
                int((await conn.execute(with_artifacts)).scalar_one()),
                int((await conn.execute(artifact_rows)).scalar_one()),
                int((await conn.execute(completed)).scalar_one()),
            )
    finally:
        await engine.dispose()

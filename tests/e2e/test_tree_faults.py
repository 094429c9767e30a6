"""Job trees under concurrency and faults, on real runtime processes and the scripted model:
fifty trees cancelled mid-run on two replicas (no child leased or accepted once a cancel has
committed), and trees drained through a runtime's and a replica's SIGKILL (every tree ends
once, its questions projected once, one ``ai.job.completed`` per job)."""

from __future__ import annotations

import asyncio
import signal
from typing import Any, cast

import grpc
import pytest
from sqlalchemy import Table, func, select

from devtools.harness.runtime_client import JobClient
from devtools.harness.waiting import eventually
from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.db.models import QuizQuestion
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from tests.support.db_checks import ARTIFACTS, JOBS, OUTBOX
from tests.support.ledger import wait_until_succeeded
from tests.support.replicas import Replica
from tests.support.runtime_procs import Launcher
from tests.support.schedulers import SchedulerFactory

pytestmark = pytest.mark.mysql

QUESTIONS = cast(Table, QuizQuestion.__table__)
#: The scripted model answers a prompt carrying this after that many milliseconds.
SLOW = "scripted-fault=latency:300"
#: ... and one carrying this never (until its caller hangs up).
HELD = "scripted-fault=gate"


async def _tree(
    jobs: JobClient,
    key: str,
    children: int,
    max_parallel: int = 0,
    fault: str = SLOW,
) -> str:
    """A parent and its children in one CreateJobs call (the parent waits from its first
    moment); the parent's id."""
    items = [
        job_pb.CreateJobsItem(
            job=job_pb.CreateJobRequest(
                job_type="synthetic_echo",
                idempotency_key=f"{key}-parent",
                max_parallel=max_parallel,
            )
        )
    ]
    items += [
        job_pb.CreateJobsItem(
            job=job_pb.CreateJobRequest(
                job_type="synthetic_echo", idempotency_key=f"{key}-{n}", parent_job_id="#0"
            )
        )
        for n in range(children)
    ]
    for n, item in enumerate(items):
        item.job.snapshot.update({"text": f"{key} node {n} {fault}"})
    reply = await jobs.stub.CreateJobs(
        job_pb.CreateJobsRequest(items=items), metadata=jobs.metadata
    )
    assert [r.status.code for r in reply.results] == [0] * len(items), reply.results[0].status
    return str(reply.results[0].job.job_id)


async def _quiz(jobs: JobClient, key: str) -> str:
    """A 30-question quiz over three knowledge points: it splits into three children."""
    request = job_pb.CreateJobRequest(job_type="quiz_generation", idempotency_key=key)
    request.snapshot.update(
        {
            "learner": {"id": "learner-1"},
            "material": {"id": "m-1", "title": f"Cells {SLOW}"},
            "knowledgePoints": [{"id": f"kp-{n}", "name": f"Point {n}"} for n in range(3)],
        }
    )
    request.params.update({"count": 30})
    reply = await jobs.stub.CreateJob(request, metadata=jobs.metadata)
    return str(reply.job.job_id)


async def _children_of(engine: Any, root: str) -> dict[str, tuple[str, int]]:
    """Each job below ``root``: its status and attempts."""
    query = select(JOBS.c.id, JOBS.c.lifecycleStatus, JOBS.c.attemptCount).where(
        JOBS.c.rootJobId == root
    )
    async with engine.connect() as conn:
        return {
            job_id: (status, attempts) for job_id, status, attempts in await conn.execute(query)
        }


async def _status(engine: Any, job_id: str) -> str:
    async with engine.connect() as conn:
        return str(await conn.scalar(select(JOBS.c.lifecycleStatus).where(JOBS.c.id == job_id)))


async def test_fifty_trees_cancelled_on_two_replicas_lease_no_child_after_the_cancel(
    mysql_url: str, start_scheduler: SchedulerFactory, launch: Launcher
) -> None:
    """Fifty trees of four children (two at a time) on two replicas, their runtimes' slots full
    of children held at the model and the rest queued or held back: once every parent's cancel
    has returned, every job of every tree has ended cancelled, and none is leased again (its
    attempts stay as they were) while the runtimes, their slots freed by the cancels, go on to
    other work."""
    replicas = [await start_scheduler(mysql_url) for _ in range(2)]
    for n, replica in enumerate(replicas):
        launch(replica, f"rt-cancel-{n}", AIJOB_RUNTIME_SLOTS="4")
    clients = [JobClient(replica.channel) for replica in replicas]
    parents = [
        await _tree(clients[n % 2], f"tree-{n}", children=4, max_parallel=2, fault=HELD)
        for n in range(50)
    ]
    engine = replicas[0].app.engine

    async def slots_full() -> bool:
        async with engine.connect() as conn:
            running = await conn.scalar(
                select(func.count()).where(JOBS.c.lifecycleStatus == "running")
            )
        return running == 8

    await eventually(slots_full, within_s=120)

    async def cancel(n: int, parent: str) -> dict[str, tuple[str, int]]:
        await clients[n % 2].cancel(parent)
        return await _children_of(engine, parent)

    at_cancel = await asyncio.gather(*(cancel(n, p) for n, p in enumerate(parents)))
    for nodes in at_cancel:
        assert len(nodes) == 4
        assert {status for status, _ in nodes.values()} == {"cancelled"}, nodes
    assert {await _status(engine, parent) for parent in parents} == {"cancelled"}
    # The runtimes take other work after the cancels: by the time it is done, a child of a
    # cancelled tree still on offer would have been leased.
    later = [
        (await clients[n % 2].create(snapshot={"text": f"later {n}"})).job_id for n in range(16)
    ]

    async def later_done() -> bool:
        async with engine.connect() as conn:
            done = await conn.scalar(
                select(func.count()).where(
                    JOBS.c.id.in_(later), JOBS.c.lifecycleStatus == "succeeded"
                )
            )
        return done == len(later)

    await eventually(later_done, within_s=120)
    for parent, nodes in zip(parents, at_cancel, strict=True):
        assert await _children_of(engine, parent) == nodes


async def test_trees_through_a_runtime_and_a_replica_sigkill_end_once(
    replicas: list[Replica], launch: Launcher, mysql_url: str
) -> None:
    channels = [grpc.aio.insecure_channel(r.address) for r in replicas]
    try:
        clients = [JobClient(channel) for channel in channels]
        quizzes = [await _quiz(clients[n % 2], f"quiz-{n}") for n in range(10)]
        for n in range(20):
            await _tree(clients[n % 2], f"tree-{n}", children=4)
    finally:
        for channel in channels:
            await channel.close(None)
    total = len(quizzes) * 4 + 20 * 5
    runtimes = [
        launch(replicas[n % 2].address, f"rt-tree-{n}", AIJOB_RUNTIME_SLOTS="4") for n in range(4)
    ]
    await wait_until_succeeded(mysql_url, total // 3)
    runtimes[0].send_signal(signal.SIGKILL)
    await wait_until_succeeded(mysql_url, 2 * total // 3)
    replicas[0].kill()
    replicas[0].start()
    await wait_until_succeeded(mysql_url, total)
    engine = create_engine(mysql_url, pool_size=1)
    try:

        async def all_published() -> bool:
            async with engine.connect() as conn:
                pending = await conn.scalar(
                    select(func.count()).where(OUTBOX.c.status != "published")
                )
            return pending == 0

        await eventually(all_published, within_s=120)
        async with engine.connect() as conn:
            statuses: dict[str, int] = dict(
                (
                    await conn.execute(
                        select(JOBS.c.lifecycleStatus, func.count()).group_by(
                            JOBS.c.lifecycleStatus
                        )
                    )
                ).all()
            )
            completed = (
                await conn.execute(
                    select(OUTBOX.c.aggregateId, func.count())
                    .where(OUTBOX.c.eventType == "ai.job.completed")
                    .group_by(OUTBOX.c.aggregateId)
                )
            ).all()
            questions: dict[str, int] = dict(
                (
                    await conn.execute(
                        select(QUESTIONS.c.jobId, func.count()).group_by(QUESTIONS.c.jobId)
                    )
                ).all()
            )
            other_attempts = await conn.scalar(
                select(func.count())
                .select_from(ARTIFACTS.join(JOBS, JOBS.c.id == ARTIFACTS.c.jobId))
                .where(ARTIFACTS.c.attemptNo != JOBS.c.attemptCount)
            )
    finally:
        await engine.dispose()
    assert statuses == {"succeeded": total}
    # Every job (each parent included) ended once: one completed event each.
    assert len(completed) == total and {n for _, n in completed} == {1}
    # Each quiz's questions were written once, at its parent, from the children's last attempts.
    assert questions == dict.fromkeys(quizzes, 30)
    assert other_attempts == 0

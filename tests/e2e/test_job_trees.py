"""Job trees on real runtime processes and the scripted model: a quiz too long for one call
splits into children, side by side, and lands as one question set projected once, at the
parent; a one-slot runtime runs a whole tree to the end."""

from __future__ import annotations

from typing import Any, cast

import pytest
from sqlalchemy import Table, func, select

from devtools.harness.runtime_client import JobClient
from devtools.harness.waiting import eventually
from scheduler_service.sql.db.models import AiUsageLog, QuizQuestion
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from tests.support.db_checks import JOBS, events
from tests.support.runtime_procs import Launcher, status_is
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql

QUESTIONS = cast(Table, QuizQuestion.__table__)
USAGE = cast(Table, AiUsageLog.__table__)
POINTS = [{"id": f"kp-{n}", "name": f"Point {n}"} for n in range(4)]
SNAPSHOT: dict[str, Any] = {
    "learner": {"id": "learner-1"},
    "material": {"id": "m-1", "title": "Cells"},
    "knowledgePoints": POINTS,
}


async def test_a_long_quiz_splits_and_lands_once_at_its_parent(
    scheduler: RunningScheduler, launch: Launcher
) -> None:
    launch(scheduler, "rt-quiz", AIJOB_RUNTIME_SLOTS="4")
    jobs = JobClient(scheduler.channel)
    request = job_pb.CreateJobRequest(job_type="quiz_generation")
    request.snapshot.update(SNAPSHOT)
    request.params.update({"count": 40})
    reply = await jobs.stub.CreateJob(request, metadata=jobs.metadata)
    parent = reply.job.job_id
    assert reply.job.lifecycle_status == "waiting"
    await status_is(scheduler, parent, "succeeded")
    engine = scheduler.app.engine
    async with engine.connect() as conn:
        children = (
            await conn.execute(
                select(JOBS.c.id, JOBS.c.lifecycleStatus).where(JOBS.c.parentJobId == parent)
            )
        ).all()
        rows = (await conn.execute(select(QUESTIONS.c.jobId, QUESTIONS.c.knowledgePointId))).all()
    assert len(children) == 4 and {status for _, status in children} == {"succeeded"}
    # Written once, all at the parent: 40 questions, on every knowledge point.
    assert {job_id for job_id, _ in rows} == {parent}
    assert len(rows) == 40
    assert {point for _, point in rows} == {p["id"] for p in POINTS}
    assert (await events(engine, parent)).count("ai.job.completed") == 1
    # The tree's usage is the ledger's over its jobs.
    tree = await jobs.stub.GetJobTree(
        job_pb.GetJobTreeRequest(job_id=parent), metadata=jobs.metadata
    )
    ids = [node.job_id for node in tree.nodes]
    async with engine.connect() as conn:
        ledger = (
            await conn.execute(
                select(
                    func.sum(USAGE.c.promptTokens),
                    func.sum(USAGE.c.completionTokens),
                    func.sum(USAGE.c.costMicros),
                ).where(USAGE.c.jobId.in_(ids))
            )
        ).one()
    assert tree.prompt_tokens > 0
    assert (tree.prompt_tokens, tree.completion_tokens, tree.cost_micros) == tuple(ledger)


async def test_a_one_slot_runtime_runs_a_twenty_child_tree_to_the_end(
    scheduler: RunningScheduler, launch: Launcher
) -> None:
    """The parent waits holding no slot: the one slot runs every child, then the parent."""
    launch(scheduler, "rt-one-slot", AIJOB_RUNTIME_SLOTS="1")
    jobs = JobClient(scheduler.channel)
    parent = (await jobs.create(max_parallel=2)).job_id
    for n in range(20):
        await jobs.create(snapshot={"text": f"child {n}"}, parent_job_id=parent)
    engine = scheduler.app.engine
    peak = 0

    async def done() -> bool:
        nonlocal peak
        async with engine.connect() as conn:
            running = await conn.scalar(
                select(func.count()).where(
                    JOBS.c.parentJobId == parent, JOBS.c.lifecycleStatus == "running"
                )
            )
            status = await conn.scalar(select(JOBS.c.lifecycleStatus).where(JOBS.c.id == parent))
        peak = max(peak, int(running or 0))
        return status == "succeeded"

    await eventually(done, within_s=120)
    assert peak <= 2
    tree = await jobs.stub.GetJobTree(
        job_pb.GetJobTreeRequest(job_id=parent), metadata=jobs.metadata
    )
    assert [n.lifecycle_status for n in tree.nodes] == ["succeeded"] * 21

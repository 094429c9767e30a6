"""The token bill on real runtime processes, MariaDB and the scripted model answering as DeepSeek
does today (thinking on unless told otherwise, prefixes cached by its rule): a reasoning call is
working, not congested; a blank JSON answer is retried and the next attempt succeeds with no
repair call; a learner's five job types over one snapshot share its rendering as a prefix."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import func, select

from devtools.harness.runtime_client import JobClient
from devtools.harness.tokens import ADMIN_TOKEN, bearer
from devtools.scripted_model import ScriptedModelServer
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc, types_pb2
from shared.job_types.learning import LearningSnapshot
from tests.support.db_checks import USAGE, job_row
from tests.support.runtime_procs import Launcher, status_is
from tests.support.schedulers import RunningScheduler, SchedulerFactory

pytestmark = pytest.mark.mysql

SNAPSHOT: dict[str, Any] = {
    "learner": {"id": "learner-1", "level": "A2", "goals": ["pass the exam"]},
    "material": {"id": "m-1", "title": "Cells", "content": "Mitochondria make ATP. " * 40},
    "knowledgePoints": [
        {"id": f"kp-{n}", "name": f"Point {n}", "mastery": n / 10} for n in range(6)
    ],
    "answers": [
        {"questionId": f"q-{n}", "knowledgePointId": f"kp-{n % 6}", "correct": n % 3 == 0}
        for n in range(12)
    ],
}
LEARNER_TYPES = (
    "learning_state_analysis",
    "weak_point_analysis",
    "next_action_planning",
    "quiz_generation",
    "flashcard_generation",
)


async def _key_concurrency(scheduler: RunningScheduler) -> int:
    admin = admin_service_pb2_grpc.AdminServiceStub(scheduler.channel)
    stats = await admin.GetQueueStats(
        admin_pb.GetQueueStatsRequest(), metadata=bearer(ADMIN_TOKEN), timeout=30
    )
    (key,) = [k for k in stats.model_keys if k.limit.model == "deepseek-v4-flash"]
    return int(key.effective_concurrency)


async def test_a_reasoning_call_is_working_not_congested(
    mysql_url: str, start_scheduler: SchedulerFactory, launch: Launcher
) -> None:
    """Its first content token comes 5 s after its first reasoning delta: the reasoning was the
    first token, so the key's concurrency is not lowered (a 5 s first token would halve it)."""
    scheduler = await start_scheduler(
        mysql_url, model_initial_concurrency=4, model_latency_tolerance=1.5
    )
    launch(scheduler, "rt-think", AIJOB_RUNTIME_SLOTS="4")
    jobs = JobClient(scheduler.channel)
    high = types_pb2.REASONING_EFFORT_HIGH
    for n in range(4):  # the key's first-token baseline
        await status_is(
            scheduler,
            (await jobs.create(snapshot={"text": f"warm {n}"}, reasoning_effort=high)).job_id,
            "succeeded",
        )
    before = await _key_concurrency(scheduler)
    slow = await jobs.create(snapshot={"text": "scripted-fault=think:5000"}, reasoning_effort=high)
    await status_is(scheduler, slow.job_id, "succeeded")
    assert await _key_concurrency(scheduler) >= before
    async with scheduler.app.engine.connect() as conn:
        first_token_ms, reasoning = (
            await conn.execute(
                select(USAGE.c.firstTokenMs, USAGE.c.reasoningTokens).where(
                    USAGE.c.jobId == slow.job_id
                )
            )
        ).one()
    assert first_token_ms < 5_000 and reasoning > 0
    # The usage API shows the reasoning tokens (priced with the completion tokens they are in).
    admin = admin_service_pb2_grpc.AdminServiceStub(scheduler.channel)
    usage = await admin.GetUserUsage(
        admin_pb.GetUserUsageRequest(user_id="user-1"), metadata=bearer(ADMIN_TOKEN)
    )
    async with scheduler.app.engine.connect() as conn:
        ledger = await conn.scalar(
            select(func.sum(USAGE.c.reasoningTokens)).where(USAGE.c.userId == "user-1")
        )
    assert usage.reasoning_tokens == ledger > reasoning
    assert usage.completion_tokens > usage.reasoning_tokens


async def test_a_blank_json_answer_is_retried_and_the_next_attempt_succeeds_unrepaired(
    scheduler: RunningScheduler, launch: Launcher, model_server: ScriptedModelServer
) -> None:
    model_server.state.queued.append("blank")
    launch(scheduler, "rt-blank")
    job = await JobClient(scheduler.channel).create("weak_point_analysis", snapshot=SNAPSHOT)
    await status_is(scheduler, job.job_id, "succeeded")
    assert (await job_row(scheduler.app.engine, job.job_id))["attemptCount"] == 2
    assert model_server.state.counts["requests"] == 2  # the blank answer and the next attempt


async def test_a_learners_five_job_types_share_the_snapshot_as_a_prefix(
    scheduler: RunningScheduler, launch: Launcher, model_server: ScriptedModelServer
) -> None:
    """Each create sends the snapshot's keys in another order; every type's thinking is off."""
    launch(scheduler, "rt-learner", AIJOB_RUNTIME_SLOTS="1")
    jobs = JobClient(scheduler.channel)
    created = []
    for turn, job_type in enumerate(LEARNER_TYPES):
        keys = list(SNAPSHOT)
        reordered = {
            key: SNAPSHOT[key] for key in keys[turn % len(keys) :] + keys[: turn % len(keys)]
        }
        created.append((await jobs.create(job_type, snapshot=reordered)).job_id)
    for job_id in created:
        await status_is(scheduler, job_id, "succeeded")
    prompts = model_server.state.prompts
    assert len(prompts) == len(LEARNER_TYPES)
    assert model_server.state.efforts == [""] * len(LEARNER_TYPES)
    stored = (await job_row(scheduler.app.engine, created[0]))["promptVersion"]
    assert stored == "v2"
    # The snapshot as stored (every field, defaults filled in), rendered canonically.
    rendered = json.dumps(
        _stored_snapshot(), ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )
    for later in prompts[1:]:
        shared = _common_prefix(prompts[0], later)
        assert shared >= len(rendered) and rendered in prompts[0][:shared]


def _stored_snapshot() -> dict[str, Any]:
    return LearningSnapshot.model_validate(SNAPSHOT).model_dump(mode="json")


def _common_prefix(first: str, second: str) -> int:
    for index, (a, b) in enumerate(zip(first, second, strict=False)):
        if a != b:
            return index
    return min(len(first), len(second))

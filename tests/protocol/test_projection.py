"""Projectors: each job type's output becomes its business rows and artifacts, idempotently."""

from __future__ import annotations

from typing import Any, cast

import pytest
from google.protobuf import struct_pb2
from sqlalchemy import Table

from devtools.harness.runtime_client import ClientRuntime, JobClient
from scheduler_service.sql.db.models import (
    AiLearningAnalysis,
    Flashcard,
    NextActionRecommendation,
    QuizQuestion,
    WeakPointCandidate,
)
from scheduler_service.sql.projection.projectors import JobContext, project_many
from shared.job_schemas import OUTPUT_SCHEMAS
from tests.support.db_checks import ARTIFACTS, count
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql

SNAPSHOT = {
    "learner": {"id": "learner-1", "level": "beginner", "goals": ["pass biology"]},
    "material": {"id": "mat-1", "title": "Cells", "content": "Cells are the unit of life."},
    "knowledgePoints": [{"id": "kp-1", "name": "Mitochondria", "mastery": 0.3}],
    "answers": [{"questionId": "q-1", "knowledgePointId": "kp-1", "correct": False}],
}

OUTPUTS: dict[str, tuple[dict[str, Any], type[Any], int]] = {
    "learning_state_analysis": (
        {"summary": "Shaky on organelles.", "masteryLevel": "developing", "strengths": ["recall"]},
        AiLearningAnalysis,
        1,
    ),
    "weak_point_analysis": (
        {
            "weakPoints": [
                {
                    "knowledgePointId": "kp-1",
                    "title": "Mitochondria",
                    "reason": "Missed q-1",
                    "severity": "high",
                    "confidence": 80,
                },
                {
                    "title": "Cell walls",
                    "reason": "Not practised",
                    "severity": "low",
                    "confidence": 40,
                },
            ]
        },
        WeakPointCandidate,
        2,
    ),
    "next_action_planning": (
        {
            "actions": [
                {
                    "actionType": "review",
                    "title": "Review mitochondria",
                    "reason": "Weakest",
                    "priority": 1,
                }
            ]
        },
        NextActionRecommendation,
        1,
    ),
    "quiz_generation": (
        {
            "questions": [
                {
                    "questionType": "single_choice",
                    "stem": "Powerhouse of the cell?",
                    "choices": [
                        {"key": "A", "text": "Mitochondria"},
                        {"key": "B", "text": "Nucleus"},
                    ],
                    "answer": "A",
                    "difficulty": "easy",
                    "knowledgePointId": "kp-1",
                },
                {"questionType": "true_false", "stem": "Cells have walls.", "answer": False},
            ]
        },
        QuizQuestion,
        2,
    ),
    "flashcard_generation": (
        {
            "cards": [
                {"front": "Mitochondria", "back": "Makes ATP"},
                {"front": "Nucleus", "back": "Holds DNA"},
                {"front": "Ribosome", "back": "Makes protein", "hint": "small"},
            ]
        },
        Flashcard,
        3,
    ),
}


@pytest.mark.parametrize("job_type", sorted(OUTPUTS))
async def test_each_job_type_projects_its_rows(scheduler: RunningScheduler, job_type: str) -> None:
    output, model, rows = OUTPUTS[job_type]
    runtime = ClientRuntime(scheduler.channel, "rt-proj", job_types=[job_type], slots=1)
    await runtime.connect()
    jobs = JobClient(scheduler.channel)
    try:
        params = {"count": rows} if job_type in {"quiz_generation", "flashcard_generation"} else {}
        created = await jobs.create(job_type, snapshot=SNAPSHOT, params=_struct(params))
        lease = await runtime.next_lease()
        await runtime.submit(lease, output)
        job = await jobs.get(created.job_id)
        assert job.lifecycle_status == "succeeded"
        assert job.result.artifact_count == rows
        assert {a.artifact_type for a in job.result.artifacts} == {model.__tablename__}
        engine = scheduler.app.engine
        table = cast(Table, model.__table__)
        assert await count(engine, table, jobId=created.job_id) == rows
        assert await count(engine, ARTIFACTS, jobId=created.job_id) == rows

        # Projecting the same output again is an idempotent success: nothing new is written.
        validated = OUTPUT_SCHEMAS[(job_type, "v1")].model_validate(output)
        context = JobContext(created.job_id, "user-1", 1, None, None)
        projector = scheduler.app.registry.get(job_type).projector
        async with engine.begin() as conn:
            refs = await project_many(conn, [(projector, context, validated)])
        assert [(a.artifact_type, a.artifact_id) for a in job.result.artifacts] == [
            (r.artifact_type, r.artifact_id) for r in refs
        ]
        assert await count(engine, table, jobId=created.job_id) == rows
        assert await count(engine, ARTIFACTS, jobId=created.job_id) == rows
    finally:
        await runtime.close()


def _struct(values: dict[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(values)
    return message

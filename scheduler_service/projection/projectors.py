"""Projectors, one per job type's output, looked up by the definition's projector key
(docs/architecture.md, *Results and projection*).

A projector turns a validated output into rows of its business table plus one ``AiJobArtifact``
row each. Row ids are derived from (job, table, ordinal), so projecting the same output twice
collides on the unique keys and is an idempotent success.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from pydantic import BaseModel
from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.db.idempotent import insert_ignoring_duplicates
from scheduler_service.db.models import (
    AiJobArtifact,
    AiLearningAnalysis,
    Base,
    Flashcard,
    NextActionRecommendation,
    QuizQuestion,
    WeakPointCandidate,
)
from shared.job_schemas import (
    FlashcardGenerationOutput,
    LearningStateAnalysisOutput,
    NextActionPlanningOutput,
    QuizGenerationOutput,
    WeakPointAnalysisOutput,
)

__all__ = ["PROJECTORS", "ArtifactRef", "JobContext", "Projector", "project"]

_NAMESPACE = uuid.UUID("8c5e7f0a-3b1d-4c2e-9f6a-2d7b1e4a9c30")
_artifacts = cast(Table, AiJobArtifact.__table__)


@dataclass(frozen=True, slots=True)
class JobContext:
    job_id: str
    user_id: str
    attempt_no: int
    target_type: str | None
    target_id: str | None


@dataclass(frozen=True, slots=True)
class ArtifactRef:
    artifact_type: str
    artifact_id: str


RowBuilder = Callable[[JobContext, Any], Sequence[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Projector:
    key: str
    artifact_type: str
    #: The business table, or None for outputs that are only recorded as an artifact.
    model: type[Base] | None
    rows: RowBuilder


def stable_id(*parts: object) -> str:
    return str(uuid.uuid5(_NAMESPACE, ":".join(map(str, parts))))


def _analysis(job: JobContext, out: LearningStateAnalysisOutput) -> list[dict[str, Any]]:
    return [
        {
            "targetType": job.target_type,
            "targetId": job.target_id,
            "summary": out.summary,
            "masteryLevel": out.masteryLevel,
            "strengths": out.strengths,
            "weaknesses": out.weaknesses,
        }
    ]


def _weak_points(_job: JobContext, out: WeakPointAnalysisOutput) -> list[dict[str, Any]]:
    return [p.model_dump() for p in out.weakPoints]


def _next_actions(_job: JobContext, out: NextActionPlanningOutput) -> list[dict[str, Any]]:
    return [a.model_dump() for a in out.actions]


def _quiz(_job: JobContext, out: QuizGenerationOutput) -> list[dict[str, Any]]:
    return [
        {**q.model_dump(exclude={"choices"}), "choices": [c.model_dump() for c in q.choices]}
        for q in out.questions
    ]


def _cards(_job: JobContext, out: FlashcardGenerationOutput) -> list[dict[str, Any]]:
    return [c.model_dump() for c in out.cards]


def _echo(_job: JobContext, _out: BaseModel) -> list[dict[str, Any]]:
    return [{}]


PROJECTORS: dict[str, Projector] = {
    p.key: p
    for p in (
        Projector("learning_analysis", "AiLearningAnalysis", AiLearningAnalysis, _analysis),
        Projector("weak_points", "WeakPointCandidate", WeakPointCandidate, _weak_points),
        Projector(
            "next_actions", "NextActionRecommendation", NextActionRecommendation, _next_actions
        ),
        Projector("quiz_questions", "QuizQuestion", QuizQuestion, _quiz),
        Projector("flashcards", "Flashcard", Flashcard, _cards),
        Projector("echo", "SyntheticEcho", None, _echo),
    )
}


#: What to project: the projector's key, the job, and the validated output.
Projection = tuple[str, JobContext, BaseModel]


async def project(
    conn: AsyncConnection, projector_key: str, job: JobContext, output: BaseModel
) -> list[ArtifactRef]:
    """Write the business rows and artifact rows of ``output`` in the caller's transaction."""
    return await project_many(conn, [(projector_key, job, output)])


async def project_many(conn: AsyncConnection, items: Sequence[Projection]) -> list[ArtifactRef]:
    """Project several outputs with one multi-row insert per table."""
    business: dict[Table, list[dict[str, Any]]] = {}
    artifacts: list[dict[str, Any]] = []
    refs: list[ArtifactRef] = []
    for projector_key, job, output in items:
        projector = PROJECTORS[projector_key]
        rows, artifact_rows, job_refs = _rows(projector, job, output)
        if projector.model is not None:
            business.setdefault(cast(Table, projector.model.__table__), []).extend(rows)
        artifacts += artifact_rows
        refs += job_refs
    for table, rows in business.items():
        await insert_ignoring_duplicates(conn, table, rows)
    await insert_ignoring_duplicates(conn, _artifacts, artifacts)
    return refs


def _rows(
    projector: Projector, job: JobContext, output: BaseModel
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[ArtifactRef]]:
    business: list[dict[str, Any]] = []
    artifacts: list[dict[str, Any]] = []
    refs: list[ArtifactRef] = []
    for ordinal, fields in enumerate(projector.rows(job, output)):
        row_id = stable_id(job.job_id, projector.artifact_type, ordinal)
        if projector.model is not None:
            business.append(
                {
                    **fields,
                    "id": row_id,
                    "jobId": job.job_id,
                    "userId": job.user_id,
                    "ordinal": ordinal,
                }
            )
        artifacts.append(
            {
                "id": stable_id(job.job_id, "artifact", projector.artifact_type, ordinal),
                "jobId": job.job_id,
                "attemptNo": job.attempt_no,
                "artifactType": projector.artifact_type,
                "artifactId": row_id,
                "ordinal": ordinal,
            }
        )
        refs.append(ArtifactRef(projector.artifact_type, row_id))
    return business, artifacts, refs

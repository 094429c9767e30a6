"""The learning snapshot: what the analysis and generation job types run on (snapshot v1)."""

from __future__ import annotations

from pydantic import Field

from shared.job_types.base import Input

__all__ = ["Answer", "KnowledgePoint", "Learner", "LearningSnapshot", "Material"]


class Learner(Input):
    id: str = Field(min_length=1, max_length=191)
    level: str | None = Field(default=None, max_length=64)
    goals: list[str] = Field(default_factory=list, max_length=20)


class Material(Input):
    id: str = Field(min_length=1, max_length=191)
    title: str = Field(min_length=1, max_length=500)
    content: str = Field(default="", max_length=200_000)


class KnowledgePoint(Input):
    id: str = Field(min_length=1, max_length=191)
    name: str = Field(min_length=1, max_length=255)
    mastery: float | None = Field(default=None, ge=0, le=1)


class Answer(Input):
    questionId: str = Field(min_length=1, max_length=191)
    knowledgePointId: str | None = Field(default=None, max_length=191)
    correct: bool
    response: str = Field(default="", max_length=20_000)


class LearningSnapshot(Input):
    """What the analysis and generation job types run on (snapshot schema v1)."""

    learner: Learner
    material: Material | None = None
    knowledgePoints: list[KnowledgePoint] = Field(default_factory=list, max_length=500)
    answers: list[Answer] = Field(default_factory=list, max_length=2_000)

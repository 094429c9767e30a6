"""The projector of quiz_generation: its outputs as ``QuizQuestion`` rows."""

from __future__ import annotations

from typing import Any

from scheduler_service.sql.db.models import QuizQuestion
from scheduler_service.sql.projection.base import JobContext, Projector
from shared.job_types.quiz_generation import QuizGenerationOutput

__all__ = ["PROJECTOR"]


def _quiz(_job: JobContext, out: QuizGenerationOutput) -> list[dict[str, Any]]:
    return [
        {**q.model_dump(exclude={"choices"}), "choices": [c.model_dump() for c in q.choices]}
        for q in out.questions
    ]


PROJECTOR = Projector("quiz_questions", "QuizQuestion", QuizQuestion, _quiz)

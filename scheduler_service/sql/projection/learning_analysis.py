"""The projector of learning_state_analysis: its outputs as ``AiLearningAnalysis`` rows."""

from __future__ import annotations

from typing import Any

from scheduler_service.sql.db.models import AiLearningAnalysis
from scheduler_service.sql.projection.base import JobContext, Projector
from shared.job_types.learning_state_analysis import LearningStateAnalysisOutput

__all__ = ["PROJECTOR"]


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


PROJECTOR = Projector("learning_analysis", "AiLearningAnalysis", AiLearningAnalysis, _analysis)

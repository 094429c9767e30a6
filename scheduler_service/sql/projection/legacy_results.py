"""The projectors of active-recall and feynman-evaluation: one ``AiAnalysisResult`` row each, in
the legacy table's shape (no ordinal column; the answer is the job's target), so System A's
readers see the engine's results where they saw the old worker's."""

from __future__ import annotations

from typing import Any

from scheduler_service.sql.db.legacy_models import AiAnalysisResult
from scheduler_service.sql.projection.base import JobContext, Projector
from shared.job_types.legacy_analysis import (
    ACTIVE_RECALL,
    FEYNMAN_EVALUATION,
    ActiveRecallOutput,
    FeynmanEvaluationOutput,
)

__all__ = ["ACTIVE_RECALL_PROJECTOR", "FEYNMAN_EVALUATION_PROJECTOR", "PROJECTORS"]


def _row(
    job_type: str, job: JobContext, out: ActiveRecallOutput | FeynmanEvaluationOutput
) -> dict[str, Any]:
    return {
        "answerId": job.target_id,
        "analysisType": job_type,
        "score": out.score,
        "result": out.model_dump(mode="json"),
    }


def _recall(job: JobContext, out: ActiveRecallOutput) -> list[dict[str, Any]]:
    return [_row(ACTIVE_RECALL.job_type, job, out)]


def _feynman(job: JobContext, out: FeynmanEvaluationOutput) -> list[dict[str, Any]]:
    return [_row(FEYNMAN_EVALUATION.job_type, job, out)]


ACTIVE_RECALL_PROJECTOR = Projector(
    ACTIVE_RECALL.projector, "AiAnalysisResult", AiAnalysisResult, _recall, ordinal=False
)
FEYNMAN_EVALUATION_PROJECTOR = Projector(
    FEYNMAN_EVALUATION.projector, "AiAnalysisResult", AiAnalysisResult, _feynman, ordinal=False
)

#: Both legacy types' projectors, registered together.
PROJECTORS = (ACTIVE_RECALL_PROJECTOR, FEYNMAN_EVALUATION_PROJECTOR)

"""weak_point_analysis: Finds the knowledge points a learner struggles with."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from shared.job_types.base import NoParams, Output
from shared.job_types.learning import LearningSnapshot
from shared.job_types.spec import JobTypeSpec

__all__ = ["SPEC", "WeakPointAnalysisOutput"]

Severity = Literal["low", "medium", "high"]


class WeakPoint(Output):
    knowledgePointId: str | None = Field(default=None, max_length=191)
    title: str = Field(min_length=1, max_length=255)
    reason: str = Field(min_length=1, max_length=5_000)
    severity: Severity
    confidence: int = Field(ge=0, le=100)


class WeakPointAnalysisOutput(Output):
    weakPoints: list[WeakPoint] = Field(max_length=50)


def sample_output(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    """A schema-valid output built from the inputs: what the scripted model answers."""
    points = [p for p in snapshot.get("knowledgePoints") or [] if (p.get("mastery") or 0) < 0.6]
    return {
        "weakPoints": [
            {
                "knowledgePointId": p["id"],
                "title": p["name"],
                "reason": "Low mastery in recent answers.",
                "severity": "high" if (p.get("mastery") or 0) < 0.3 else "medium",
                "confidence": 70,
            }
            for p in points[:50]
        ]
    }


SPEC = JobTypeSpec(
    "weak_point_analysis",
    sample=sample_output,
    label="Weak point analysis",
    description="Finds the knowledge points a learner struggles with.",
    domain="analysis",
    queue="ai-background",
    timeout_ms=120000,
    projector="weak_points",
    snapshot=LearningSnapshot,
    params=NoParams,
    output=WeakPointAnalysisOutput,
    cost_policy="off_peak",
    instructions=(
        "Find the knowledge points the learner struggles with, with the evidence from their "
        "answers, a severity and a confidence from 0 to 100."
    ),
)

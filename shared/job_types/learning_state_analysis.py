"""learning_state_analysis: Summarises a learner's state from answers and knowledge points."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from shared.job_types.base import NoParams, Output
from shared.job_types.learning import LearningSnapshot
from shared.job_types.spec import JobTypeSpec

__all__ = ["SPEC", "LearningStateAnalysisOutput"]

Mastery = Literal["novice", "developing", "proficient", "mastered"]


class LearningStateAnalysisOutput(Output):
    summary: str = Field(min_length=1, max_length=5_000)
    masteryLevel: Mastery
    strengths: list[str] = Field(default_factory=list, max_length=20)
    weaknesses: list[str] = Field(default_factory=list, max_length=20)


def sample_output(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    """A schema-valid output built from the inputs: what the scripted model answers."""
    answers = snapshot.get("answers") or []
    right = sum(1 for a in answers if a.get("correct"))
    ratio = right / len(answers) if answers else 0.5
    points = snapshot.get("knowledgePoints") or []
    level = (
        "novice"
        if ratio < 0.25
        else "developing"
        if ratio < 0.6
        else "proficient"
        if ratio < 0.9
        else "mastered"
    )
    return {
        "summary": f"Answered {right} of {len(answers)} questions correctly.",
        "masteryLevel": level,
        "strengths": [p["name"] for p in points if (p.get("mastery") or 0) >= 0.6][:20],
        "weaknesses": [p["name"] for p in points if (p.get("mastery") or 0) < 0.6][:20],
    }


SPEC = JobTypeSpec(
    "learning_state_analysis",
    sample=sample_output,
    label="Learning state analysis",
    description="Summarises a learner's state from answers and knowledge points.",
    domain="analysis",
    queue="ai-background",
    timeout_ms=120000,
    projector="learning_analysis",
    snapshot=LearningSnapshot,
    params=NoParams,
    output=LearningStateAnalysisOutput,
    cost_policy="off_peak",
    instructions=(
        "Summarise the learner's current state of learning: a short summary, a mastery level, "
        "their strengths and weaknesses."
    ),
)

"""learning_state_analysis: Summarises a learner's state from answers and knowledge points."""

from __future__ import annotations

from typing import Literal

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


SPEC = JobTypeSpec(
    "learning_state_analysis",
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

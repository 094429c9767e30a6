"""active-recall and feynman-evaluation: System A's two analyses, run by the engine once an
operator adopts them (M-AI-04; ADR-003 "ai-analysis").

Their snapshot is built by the scheduler from the legacy row (its ``sessionId`` and ``answerId``)
and the learner's answer that ``answerId`` names, read from the application's tables; their
results go to the legacy ``AiAnalysisResult`` table. Queue ``ai-analysis``: the legacy worker's
semantics — one at a time per runtime unless configured, 30 s, 3 attempts, backoff from 1 s."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from shared.job_types.base import Input, NoParams, Output
from shared.job_types.spec import JobTypeSpec, Sample

__all__ = [
    "ACTIVE_RECALL",
    "FEYNMAN_EVALUATION",
    "ActiveRecallOutput",
    "AnswerSnapshot",
    "FeynmanEvaluationOutput",
]

_Point = Field(min_length=1, max_length=500)


class AnswerSnapshot(Input):
    """A learner's answer, as the legacy row names it."""

    sessionId: str | None = Field(default=None, max_length=191)
    answerId: str = Field(min_length=1, max_length=191)
    question: str | None = Field(default=None, max_length=20_000)
    answer: str = Field(max_length=20_000)


class ActiveRecallOutput(Output):
    """How much of the material the learner recalled."""

    score: int = Field(ge=0, le=100)
    recalledPoints: list[str] = Field(default_factory=list, max_length=50)
    missedPoints: list[str] = Field(default_factory=list, max_length=50)
    feedback: str = Field(min_length=1, max_length=5_000)


class FeynmanEvaluationOutput(Output):
    """How well the learner explained the idea in their own words."""

    score: int = Field(ge=0, le=100)
    clarity: int = Field(ge=0, le=100)
    gaps: list[str] = Field(default_factory=list, max_length=50)
    misconceptions: list[str] = Field(default_factory=list, max_length=50)
    feedback: str = Field(min_length=1, max_length=5_000)


def _words(snapshot: dict[str, Any]) -> list[str]:
    return [w for w in str(snapshot.get("answer") or "").split() if len(w) > 3][:10]


def recall_sample(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    words = _words(snapshot)
    return {
        "score": min(100, 10 * len(words)),
        "recalledPoints": words[:5],
        "missedPoints": [] if len(words) >= 5 else ["the rest of the material"],
        "feedback": f"You recalled {len(words[:5])} key points.",
    }


def feynman_sample(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    words = _words(snapshot)
    return {
        "score": min(100, 10 * len(words)),
        "clarity": 80 if words else 20,
        "gaps": [] if words else ["the explanation is empty"],
        "misconceptions": [],
        "feedback": "A clear explanation in your own words." if words else "Explain it again.",
    }


def _spec(
    job_type: str,
    label: str,
    description: str,
    output: type[Output],
    instructions: str,
    *,
    sample: Sample,
) -> JobTypeSpec:
    return JobTypeSpec(
        job_type,
        sample=sample,
        label=label,
        description=description,
        domain="analysis",
        queue="ai-analysis",
        timeout_ms=30_000,
        projector=job_type.replace("-", "_"),
        snapshot=AnswerSnapshot,
        params=NoParams,
        output=output,
        instructions=instructions,
        max_retries=2,
        backoff_base_ms=1_000,
    )


ACTIVE_RECALL = _spec(
    "active-recall",
    "Active recall evaluation",
    "Evaluates what a learner recalled from memory in one answer.",
    ActiveRecallOutput,
    "Evaluate the learner's active-recall answer to the question: score how much they "
    "recalled from 0 to 100, list the points they recalled and the points they missed, and "
    "give short, encouraging feedback.",
    sample=recall_sample,
)
FEYNMAN_EVALUATION = _spec(
    "feynman-evaluation",
    "Feynman explanation evaluation",
    "Evaluates a learner's explanation of an idea in their own words.",
    FeynmanEvaluationOutput,
    "Evaluate the learner's Feynman-technique explanation: score its correctness and its "
    "clarity from 0 to 100, list the gaps and misconceptions, and give short feedback.",
    sample=feynman_sample,
)

#: Both types, registered together.
SPECS = (ACTIVE_RECALL, FEYNMAN_EVALUATION)

"""next_action_planning: Recommends a learner's next steps."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from shared.job_types.base import NoParams, Output
from shared.job_types.learning import LearningSnapshot
from shared.job_types.spec import JobTypeSpec

__all__ = ["SPEC", "NextActionPlanningOutput"]


class NextAction(Output):
    actionType: Literal["review", "practice", "learn", "rest"]
    title: str = Field(min_length=1, max_length=255)
    reason: str = Field(min_length=1, max_length=5_000)
    knowledgePointId: str | None = Field(default=None, max_length=191)
    priority: int = Field(ge=0, le=100)


class NextActionPlanningOutput(Output):
    actions: list[NextAction] = Field(min_length=1, max_length=20)


def sample_output(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    """A schema-valid output built from the inputs: what the scripted model answers."""
    points = snapshot.get("knowledgePoints") or [{"id": None, "name": "the material"}]
    return {
        "actions": [
            {
                "actionType": "review" if index == 0 else "practice",
                "title": f"Work on {p['name']}",
                "reason": "It is where the most progress can be made.",
                "knowledgePointId": p.get("id"),
                "priority": index,
            }
            for index, p in enumerate(points[:5])
        ]
    }


SPEC = JobTypeSpec(
    "next_action_planning",
    sample=sample_output,
    label="Next action planning",
    description="Recommends a learner's next steps.",
    domain="analysis",
    queue="ai-background",
    timeout_ms=120000,
    projector="next_actions",
    snapshot=LearningSnapshot,
    params=NoParams,
    output=NextActionPlanningOutput,
    cost_policy="off_peak",
    instructions=("Recommend the learner's next steps, most useful first."),
)

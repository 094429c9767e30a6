"""The projector of next_action_planning: its outputs as ``NextActionRecommendation`` rows."""

from __future__ import annotations

from typing import Any

from scheduler_service.sql.db.models import NextActionRecommendation
from scheduler_service.sql.projection.base import JobContext, Projector
from shared.job_types.next_action_planning import NextActionPlanningOutput

__all__ = ["PROJECTOR"]


def _next_actions(_job: JobContext, out: NextActionPlanningOutput) -> list[dict[str, Any]]:
    return [a.model_dump() for a in out.actions]


PROJECTOR = Projector(
    "next_actions", "NextActionRecommendation", NextActionRecommendation, _next_actions
)

"""The projector of weak_point_analysis: its outputs as ``WeakPointCandidate`` rows."""

from __future__ import annotations

from typing import Any

from scheduler_service.sql.db.models import WeakPointCandidate
from scheduler_service.sql.projection.base import JobContext, Projector
from shared.job_types.weak_point_analysis import WeakPointAnalysisOutput

__all__ = ["PROJECTOR"]


def _weak_points(_job: JobContext, out: WeakPointAnalysisOutput) -> list[dict[str, Any]]:
    return [p.model_dump() for p in out.weakPoints]


PROJECTOR = Projector("weak_points", "WeakPointCandidate", WeakPointCandidate, _weak_points)

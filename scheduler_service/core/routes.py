"""Model routes: the ordered tiers a job type's calls may go to (``primary``, then fallbacks),
and which tier a lease takes given the tiers' circuit breakers (core/breakers.py). Pure.

A job that pins a model (``CreateJobRequest.model``) has that model alone as its route. A job on
its user's own key falls back only to tiers its user's key can pay for (the same provider),
never to a platform key."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["ModelRoute", "ModelTier", "pick_tier", "route_of", "tier_name"]


@dataclass(frozen=True, slots=True)
class ModelTier:
    provider: str
    model: str


@dataclass(frozen=True, slots=True)
class ModelRoute:
    job_type: str
    tiers: tuple[ModelTier, ...]


def tier_name(index: int) -> str:
    """How a tier is recorded on the job and its attempts (the seeds' ``modelTier``)."""
    if index == 0:
        return "primary"
    return "fallback" if index == 1 else f"fallback-{index}"


def route_of(
    route: ModelRoute, *, pinned: ModelTier | None = None, user_key_provider: str | None = None
) -> ModelRoute:
    """The route one job follows: its type's, or the model it pinned alone; on a user's own key,
    only the tiers of that key's provider."""
    if pinned is not None:
        return ModelRoute(route.job_type, (pinned,))
    if user_key_provider is None:
        return route
    return ModelRoute(
        route.job_type, tuple(t for t in route.tiers if t.provider == user_key_provider)
    )


def pick_tier(
    tiers: Sequence[ModelTier], admits: Callable[[ModelTier], bool]
) -> tuple[int, ModelTier] | None:
    """The first tier whose breaker admits a call, with its index; None when none does (the job
    waits in the queue: no tier can answer now)."""
    for index, tier in enumerate(tiers):
        if admits(tier):
            return index, tier
    return None

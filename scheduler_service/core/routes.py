"""Model routes: the ordered tiers a job type's calls may go to (``primary``, then fallbacks),
and which tier a lease takes given the tiers' circuit breakers (core/breakers.py). Pure.

A job that pins a model (``CreateJobRequest.model``) has that model alone as its route. A job on
its user's own key falls back only to tiers its user's key can pay for (the same provider),
never to a platform key."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from scheduler_service.core.breakers import BreakerKey, BreakerPolicy
from scheduler_service.core.model_keys import key_model

__all__ = [
    "PRIMARY",
    "ModelRoute",
    "ModelTier",
    "RouteBook",
    "Router",
    "parse_routes",
    "parse_tier",
    "pick_tier",
    "route_of",
    "tier_name",
]

PRIMARY = "primary"
#: A provider's name as settings spell it (AIJOB_PROVIDER_<NAME>_BASE_URL, lower-cased).
_PROVIDER = re.compile(r"[a-z0-9][a-z0-9_]{0,31}")
#: Most tiers one route may have.
MAX_TIERS = 8


@dataclass(frozen=True, slots=True)
class ModelTier:
    provider: str
    model: str

    def __str__(self) -> str:
        return f"{self.provider}/{self.model}"


def parse_tier(text: str) -> ModelTier:
    """``provider/model`` (a model name may hold slashes); ValueError when malformed."""
    provider, sep, model = text.strip().partition("/")
    return checked_tier(ModelTier(provider.strip(), model.strip()) if sep else ModelTier("", ""))


def checked_tier(tier: ModelTier) -> ModelTier:
    """The tier, or ValueError naming what is wrong with it."""
    if not _PROVIDER.fullmatch(tier.provider):
        raise ValueError(
            f"provider {tier.provider!r} must be lower-case letters, digits or _ (at most 32)"
        )
    if not tier.model or len(tier.model) > 64 or not tier.model.isprintable():
        raise ValueError(f"model {tier.model!r} must be 1 to 64 printable characters")
    return tier


def checked_tiers(tiers: Sequence[ModelTier]) -> tuple[ModelTier, ...]:
    if len(tiers) > MAX_TIERS:
        raise ValueError(f"a route has at most {MAX_TIERS} tiers")
    checked = tuple(checked_tier(t) for t in tiers)
    if len(set(checked)) != len(checked):
        raise ValueError("a route names each tier once")
    return checked


def parse_routes(text: str) -> dict[str, tuple[ModelTier, ...]]:
    """AIJOB_MODEL_ROUTES: ``job_type=provider/model,provider/model;job_type=...``."""
    routes: dict[str, tuple[ModelTier, ...]] = {}
    for entry in filter(None, (part.strip() for part in text.split(";"))):
        job_type, sep, tiers = entry.partition("=")
        if not sep or not job_type.strip():
            raise ValueError(f"expected job_type=provider/model,...; got {entry!r}")
        parsed = [parse_tier(t) for t in tiers.split(",") if t.strip()]
        if not parsed:
            raise ValueError(f"the route of {job_type.strip()} names no tier")
        routes[job_type.strip()] = checked_tiers(parsed)
    return routes


@dataclass(frozen=True, slots=True)
class ModelRoute:
    job_type: str
    tiers: tuple[ModelTier, ...]


def tier_name(index: int) -> str:
    """How a tier is recorded on the job and its attempts (the seeds' ``modelTier``)."""
    if index == 0:
        return PRIMARY
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


@dataclass(frozen=True, slots=True)
class RouteBook:
    """Where a job type's route comes from: an operator's (``operator``, from the database)
    over the settings' (AIJOB_MODEL_ROUTES) over its definition's model alone."""

    settings: Mapping[str, tuple[ModelTier, ...]]
    operator: Mapping[str, tuple[ModelTier, ...]]

    def route(self, job_type: str, definition_tier: ModelTier) -> ModelRoute:
        """The route of ``job_type``, whose definition names ``definition_tier``."""
        tiers = self.operator.get(job_type) or self.settings.get(job_type) or (definition_tier,)
        return ModelRoute(job_type, tiers)

    @property
    def reroutes(self) -> bool:
        """Some type's route is not its definition's model alone: a claim must read each
        candidate's route, not lease it on the model it was created with."""
        return bool(self.operator) or bool(self.settings)


@dataclass(frozen=True, slots=True)
class Router:
    """What a claim needs to route a job: its type's route (``book``; ``definition_tier``
    names each type's own model, None for a type no longer registered) and which of its
    tiers a job on its user's key may use."""

    book: RouteBook
    definition_tier: Callable[[str], ModelTier | None]
    user_key_mode: str
    user_key_provider: str = "deepseek"
    breakers: BreakerPolicy = field(default_factory=BreakerPolicy)

    def with_operator(self, operator: Mapping[str, tuple[ModelTier, ...]]) -> Router:
        return replace(self, book=RouteBook(self.book.settings, operator))

    def tiers(
        self, job_type: str, current: ModelTier, *, pinned: bool, credential_mode: str
    ) -> tuple[ModelTier, ...]:
        """The tiers a job may lease on, in order: its model alone when it pinned it (or its
        type is gone); its type's route, on a user's key only that key's provider's tiers."""
        defined = self.definition_tier(job_type)
        if pinned or defined is None:
            return (current,)
        user_provider = self.user_key_provider if credential_mode == self.user_key_mode else None
        tiers = route_of(self.book.route(job_type, defined), user_key_provider=user_provider).tiers
        return tiers or (current,)

    def breaker_key(
        self, provider: str, model: str, credential_mode: str, credential_id: str | None
    ) -> BreakerKey:
        """The breaker a call on this model and key trips: a user's stored credential's own,
        or the platform's key's."""
        user_key = credential_mode == self.user_key_mode
        return BreakerKey(provider, key_model(model), (credential_id or "") if user_key else "")

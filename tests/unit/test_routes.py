"""Model routes (core/routes.py): a lease takes the first tier whose breaker admits; a pinned
model is its job's whole route; a user's own key falls back only within its provider."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scheduler_service.core.routes import ModelRoute, ModelTier, pick_tier, route_of, tier_name

PRO = ModelTier("deepseek", "deepseek-v4-pro")
FLASH = ModelTier("deepseek", "deepseek-flash")
OTHER = ModelTier("other", "other-model")
ROUTE = ModelRoute("weak_point_analysis", (PRO, FLASH, OTHER))


def test_tiers_are_named_as_the_job_records_them() -> None:
    assert [tier_name(i) for i in range(4)] == ["primary", "fallback", "fallback-2", "fallback-3"]


def test_a_pinned_model_is_the_whole_route_and_a_user_key_stays_with_its_provider() -> None:
    assert route_of(ROUTE, pinned=FLASH).tiers == (FLASH,)
    assert route_of(ROUTE, user_key_provider="deepseek").tiers == (PRO, FLASH)
    assert route_of(ROUTE).tiers == (PRO, FLASH, OTHER)


@given(st.sets(st.sampled_from([PRO, FLASH, OTHER])))
def test_the_first_admitting_tier_is_taken(open_tiers: set[ModelTier]) -> None:
    picked = pick_tier(ROUTE.tiers, lambda tier: tier not in open_tiers)
    admitting = [t for t in ROUTE.tiers if t not in open_tiers]
    if not admitting:
        assert picked is None
    else:
        assert picked == (ROUTE.tiers.index(admitting[0]), admitting[0])


@given(st.sets(st.sampled_from([PRO, FLASH, OTHER])))
def test_a_pinned_job_never_changes_model(open_tiers: set[ModelTier]) -> None:
    picked = pick_tier(route_of(ROUTE, pinned=PRO).tiers, lambda t: t not in open_tiers)
    assert picked in (None, (0, PRO))

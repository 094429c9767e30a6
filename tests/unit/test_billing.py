"""Prices and budgets (scheduler_service/billing): pure."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler_service.billing.budgets import Budget, Spend
from scheduler_service.billing.prices import DEFAULT_PRICES, ModelPrice, PriceTable
from scheduler_service.billing.usage import Usage

TABLE = PriceTable.parse(DEFAULT_PRICES)


def _usage(model: str, prompt: int, cached: int, completion: int, cost: int = 7) -> Usage:
    return Usage(
        model_name=model,
        prompt_tokens=prompt,
        completion_tokens=completion,
        latency_ms=1,
        cost_micros=cost,
        cached_prompt_tokens=cached,
    )


def test_cache_hits_cost_less_and_unknown_models_keep_the_reported_cost() -> None:
    fresh = TABLE.priced(_usage("deepseek-chat", 1_000_000, 0, 0)).cost_micros
    cached = TABLE.priced(_usage("deepseek-chat", 1_000_000, 1_000_000, 0)).cost_micros
    assert (fresh, cached) == (270_000, 70_000)
    assert TABLE.priced(_usage("deepseek-chat", 0, 0, 1_000_000)).cost_micros == 1_100_000
    assert TABLE.priced(_usage("gpt-x", 10, 0, 10, cost=42)).cost_micros == 42
    # The reported name is not listed: the job's model prices it.
    assert TABLE.priced(_usage("", 1_000_000, 0, 0), "deepseek-reasoner").cost_micros == 550_000


@given(
    st.integers(min_value=0, max_value=10**7),
    st.integers(min_value=-10, max_value=10**7),
    st.integers(min_value=0, max_value=10**7),
)
def test_a_call_costs_between_all_cached_and_none_cached(
    prompt: int, cached: int, completion: int
) -> None:
    price = ModelPrice(270_000, 70_000, 1_100_000)
    cost = price.cost_micros(prompt, cached, completion)
    assert price.cost_micros(prompt, prompt, completion) <= cost
    assert cost <= price.cost_micros(prompt, 0, completion)


@pytest.mark.parametrize("text", ["deepseek-chat=1/2", "=1/2/3", "m=a/b/c", "m:1/2/3"])
def test_a_malformed_price_table_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="model=prompt/cached/completion"):
        PriceTable.parse(text)


def test_a_budget_is_reached_by_either_part_and_zero_is_no_limit() -> None:
    budget = Budget(daily_tokens=1_000, daily_cost_micros=500)
    assert not budget.exceeded_by(Spend(999, 499))
    assert budget.exceeded_by(Spend(1_000, 0))
    assert budget.exceeded_by(Spend(0, 500))
    assert not Budget().exceeded_by(Spend(10**12, 10**12))
    # An operator's own budget: None takes the default, 0 lifts the limit.
    assert Budget(1_000, 500).with_override(None, 0) == Budget(1_000, 0)

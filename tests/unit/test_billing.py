"""Prices and budgets (scheduler_service/billing): pure."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler_service.core.budgets import Budget, Spend
from scheduler_service.core.peak_hours import DEEPSEEK_PEAK_HOURS, PeakHours
from scheduler_service.core.prices import DEFAULT_PRICES, PriceTable, Rates
from scheduler_service.core.usage import Usage

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
    fresh = TABLE.priced(_usage("deepseek-v4-flash", 1_000_000, 0, 0)).cost_micros
    cached = TABLE.priced(_usage("deepseek-v4-flash", 1_000_000, 1_000_000, 0)).cost_micros
    assert (fresh, cached) == (150_000, 3_000)
    assert TABLE.priced(_usage("deepseek-v4-pro", 0, 0, 1_000_000)).cost_micros == 1_980_000
    assert TABLE.priced(_usage("gpt-x", 10, 0, 10, cost=42)).cost_micros == 42
    # The reported name is not listed: the job's model prices it.
    assert TABLE.priced(_usage("", 1_000_000, 0, 0), "deepseek-v4-pro").cost_micros == 660_000


def test_aliases_take_the_price_of_the_model_that_serves_them() -> None:
    for alias in ("deepseek-chat", "deepseek-reasoner", "deepseek-flash"):
        assert TABLE.priced(_usage(alias, 1_000_000, 0, 0)).cost_micros == 150_000


def test_a_call_that_starts_at_peak_pays_the_peak_rate() -> None:
    peak = PeakHours.parse(DEEPSEEK_PEAK_HOURS)
    table = PriceTable.parse(DEFAULT_PRICES, peak)
    usage = _usage("deepseek-v4-flash", 1_000_000, 0, 1_000_000)
    # Thursday 2026-12-03, 10:30 Beijing time (02:30 UTC): peak; 12:30 (04:30 UTC): off-peak.
    at_peak = table.priced(usage, started_at=datetime(2026, 12, 3, 2, 30))
    off_peak = table.priced(usage, started_at=datetime(2026, 12, 3, 4, 30))
    assert (at_peak.at_peak, at_peak.cost_micros, at_peak.peak_cost_micros) == (
        True,
        1_500_000,
        1_500_000,
    )
    assert (off_peak.at_peak, off_peak.cost_micros, off_peak.peak_cost_micros) == (
        False,
        750_000,
        1_500_000,
    )
    # Saturday is off-peak all day, and so is a listed holiday.
    assert not table.priced(usage, started_at=datetime(2026, 12, 5, 2, 30)).at_peak
    holiday = PeakHours.parse(DEEPSEEK_PEAK_HOURS, "2026-12-03")
    assert not holiday.is_peak(datetime(2026, 12, 3, 2, 30))


def test_peak_windows_end_and_begin_where_they_say() -> None:
    peak = PeakHours.parse("mon-fri 09:00-12:00 14:00-18:00; sat 10:00-10:01 @Asia/Shanghai")
    assert peak.peak_ends(datetime(2026, 12, 3, 1, 0)) == datetime(2026, 12, 3, 4, 0)
    assert peak.peak_ends(datetime(2026, 12, 3, 4, 0)) is None
    assert peak.next_peak(datetime(2026, 12, 3, 4, 0)) == datetime(2026, 12, 3, 6, 0)
    assert peak.next_peak(datetime(2026, 12, 4, 10, 0)) == datetime(2026, 12, 5, 2, 0)
    assert PeakHours.parse("").next_peak(datetime(2026, 12, 3)) is None


@pytest.mark.parametrize(
    "text",
    [
        "mon-fri",
        "mon-fri 9-12 @UTC",
        "moon 09:00-10:00",
        "mon 10:00-09:00",
        "mon 09:00-10:00 @Mars/Base",
    ],
)
def test_malformed_peak_hours_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        PeakHours.parse(text)


@given(
    st.integers(min_value=0, max_value=10**7),
    st.integers(min_value=-10, max_value=10**7),
    st.integers(min_value=0, max_value=10**7),
)
def test_a_call_costs_between_all_cached_and_none_cached(
    prompt: int, cached: int, completion: int
) -> None:
    price = Rates(270_000, 70_000, 1_100_000)
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

"""The throttle storm's ideal makespan (bench/llm_storm.py): the fastest a model's limits let a
storm finish — a minute's burst bounded by the concurrency, then one minute's budget at a time."""

from __future__ import annotations

import pytest

from bench.llm_storm import ideal_makespan_s


def test_a_storm_inside_one_minutes_budget_is_bound_by_the_concurrency() -> None:
    # 300 calls of 0.2 s, 8 at once: 38 rounds (the last with 4 calls).
    assert ideal_makespan_s(300, 600, 8, 0.2) == pytest.approx(38 * 0.2)


def test_a_binding_minute_limit_spreads_the_storm_over_minutes() -> None:
    # 120 a minute: 120 calls in the first 3 s, 120 a minute later, the last 60 (8 rounds of
    # 8 at once) two minutes in.
    assert ideal_makespan_s(300, 120, 8, 0.2) == pytest.approx(120 + 8 * 0.2)
    assert ideal_makespan_s(120, 120, 8, 0.2) == pytest.approx(3.0)


def test_no_calls_take_no_time() -> None:
    assert ideal_makespan_s(0, 120, 8, 0.2) == 0.0

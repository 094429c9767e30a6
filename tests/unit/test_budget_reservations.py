"""Budget reservations, pure: admitted in any order, jobs never reserve
past the token budget by more than one job's estimate, and a user with nothing reserved and
budget left may always start one job."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scheduler_service.core.budgets import Budget, Spend, Standing, admit_within_budgets

_estimates = st.lists(st.integers(min_value=1, max_value=5_000), min_size=1, max_size=40)


@given(
    estimates=_estimates,
    budget=st.integers(min_value=1, max_value=50_000),
    spent=st.integers(min_value=0, max_value=60_000),
    reserved=st.integers(min_value=0, max_value=20_000),
)
def test_admitted_estimates_overrun_the_budget_by_one_job_at_most(
    estimates: list[int], budget: int, spent: int, reserved: int
) -> None:
    standing = Standing(Budget(daily_tokens=budget), Spend(tokens=spent), reserved)
    candidates = [(str(i), "u", e) for i, e in enumerate(estimates)]
    admitted = admit_within_budgets(candidates, {"u": standing})
    taken = [estimates[int(i)] for i in admitted]
    if spent >= budget:
        assert not taken
        return
    exposure = spent + reserved + sum(taken)
    # Past the budget only by what was reserved before, or by the one job started unreserved.
    first = taken[0] if reserved == 0 and taken else 0
    assert exposure <= max(budget, spent + reserved + first)
    if reserved == 0:
        assert taken  # one job may always start while the budget is not reached
    assert admitted == sorted(admitted, key=int)  # best first, never reordered


def test_users_without_a_budget_are_admitted_and_others_are_apart() -> None:
    standings = {"capped": Standing(Budget(daily_tokens=100), Spend(tokens=99), reserved_tokens=1)}
    admitted = admit_within_budgets([("a", "free", 10**6), ("b", "capped", 5)], standings)
    assert admitted == ["a"]

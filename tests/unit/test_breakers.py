"""The circuit breaker of a model key (core/breakers.py): consecutive provider failures open it,
a cool-down later one probe decides, a 402 holds it open until an operator resets it, and no
other failure touches it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from scheduler_service.core.breakers import (
    BREAKING_CODES,
    Breaker,
    BreakerPolicy,
    BreakerState,
    admits,
    after_failure,
    after_success,
    reset,
)
from shared.error_codes import ErrorCode

POLICY = BreakerPolicy(failures_to_open=3, cool_down=timedelta(seconds=30))
T0 = datetime(2026, 12, 6, tzinfo=UTC)


def _failed(
    breaker: Breaker, times: int, code: str = ErrorCode.TEMPORARY_PROVIDER_ERROR
) -> Breaker:
    for _ in range(times):
        breaker = after_failure(breaker, code, T0, POLICY)
    return breaker


def test_consecutive_provider_failures_open_it_and_a_success_between_them_does_not() -> None:
    assert _failed(Breaker(), 2).state is BreakerState.CLOSED
    assert _failed(Breaker(), 3).state is BreakerState.OPEN
    interrupted = after_success(_failed(Breaker(), 2))
    assert _failed(interrupted, 2).state is BreakerState.CLOSED


def test_an_open_breaker_admits_one_probe_after_its_cool_down_which_decides() -> None:
    opened = _failed(Breaker(), 3)
    assert admits(opened, T0 + timedelta(seconds=29), POLICY) == (False, opened)
    later = T0 + timedelta(seconds=30)
    admitted, probing = admits(opened, later, POLICY)
    assert admitted and probing.state is BreakerState.HALF_OPEN
    # While its probe is out, nothing else goes.
    assert admits(probing, later + timedelta(seconds=1), POLICY)[0] is False
    assert after_success(probing) == Breaker()
    assert after_failure(probing, ErrorCode.NETWORK_ERROR, later, POLICY).state is (
        BreakerState.OPEN
    )


def test_an_unpaid_account_holds_it_open_until_an_operator_resets_it() -> None:
    held = after_failure(Breaker(), ErrorCode.MODEL_INSUFFICIENT_BALANCE, T0, POLICY)
    assert held.state is BreakerState.OPEN and held.held
    assert admits(held, T0 + timedelta(days=1), POLICY)[0] is False
    assert after_success(held) == held
    assert reset(held) == Breaker()


@given(
    st.lists(
        st.sampled_from(
            [ErrorCode.VALIDATION_FAILED, ErrorCode.MODEL_RATE_LIMIT, ErrorCode.INVALID_SNAPSHOT]
        ),
        max_size=20,
    )
)
def test_failures_that_are_not_the_providers_never_touch_it(codes: list[str]) -> None:
    breaker = _failed(Breaker(), 2)
    for code in codes:
        assert code not in BREAKING_CODES
        assert after_failure(breaker, code, T0, POLICY) == breaker

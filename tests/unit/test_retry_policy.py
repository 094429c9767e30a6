"""The retry decision and full-jitter backoff."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from scheduler_service.core.job_definitions import Backoff
from scheduler_service.core.retry_policy import RetryDecision, backoff_ms, decide

BACKOFF = Backoff(base_ms=2_000, cap_ms=60_000)


def _decide(**overrides: object) -> RetryDecision:
    args: dict[str, object] = {
        "attempt_no": 1,
        "max_attempts": 3,
        "error_code": "MODEL_TIMEOUT",
        "retryable": True,
        "retry_after_ms": 0,
        "backoff": BACKOFF,
        "rng": random.Random(7),
    }
    args.update(overrides)
    return decide(**args)  # type: ignore[arg-type]


def test_retryable_with_attempts_left_is_retried() -> None:
    decision = _decide()
    assert decision.retry is True


def test_last_attempt_is_not_retried() -> None:
    assert _decide(attempt_no=3).retry is False


def test_both_the_runtime_and_the_catalogue_must_agree() -> None:
    assert _decide(retryable=False).retry is False
    assert _decide(error_code="INVALID_CREDENTIAL").retry is False


def test_internal_errors_are_retried_once() -> None:
    assert _decide(error_code="INTERNAL_ERROR", attempt_no=1, max_attempts=5).retry is True
    assert _decide(error_code="INTERNAL_ERROR", attempt_no=2, max_attempts=5).retry is False


def test_retry_after_is_a_floor() -> None:
    decision = _decide(retry_after_ms=90_000)
    assert decision.delay_ms == 90_000


@given(st.integers(min_value=1, max_value=40), st.integers(min_value=0, max_value=2**32))
def test_backoff_is_within_the_exponential_ceiling(attempt: int, seed: int) -> None:
    delay = backoff_ms(attempt, BACKOFF, random.Random(seed))
    assert 0 <= delay <= min(BACKOFF.cap_ms, BACKOFF.base_ms * 2 ** (attempt - 1))


def test_a_provider_retry_after_is_capped() -> None:
    """A Retry-After of years must not park a job (and count against its user) for years."""
    decision = decide(
        attempt_no=1,
        max_attempts=3,
        error_code="MODEL_RATE_LIMIT",
        retryable=True,
        retry_after_ms=2**62,
        backoff=BACKOFF,
        rng=random.Random(1),
        max_retry_after_ms=600_000,
    )
    assert decision.retry and decision.delay_ms == 600_000


def test_a_429_goes_back_unspent_even_on_the_last_attempt() -> None:
    decision = _decide(error_code="MODEL_RATE_LIMIT", attempt_no=3, retry_after_ms=3_000)
    assert (decision.retry, decision.waived) == (True, True)
    assert decision.delay_ms >= 3_000


def test_a_runtime_shutdown_goes_back_unspent() -> None:
    decision = _decide(error_code="RUNTIME_SHUTDOWN", attempt_no=2, max_attempts=2)
    assert (decision.retry, decision.waived) == (True, True)


def test_waived_attempts_do_not_count_against_max_attempts() -> None:
    # Attempt 5 after three waived ones is the second spent attempt of three.
    decision = _decide(attempt_no=5, waived_attempts=3, max_attempts=3)
    assert (decision.retry, decision.waived) == (True, False)
    assert _decide(attempt_no=6, waived_attempts=3, max_attempts=3).retry is False


@given(st.integers(min_value=0, max_value=50), st.integers(min_value=1, max_value=5))
def test_waivers_stop_at_their_cap_and_then_spend_attempts(waived: int, max_attempts: int) -> None:
    cap = 20
    attempt_no = waived + max_attempts  # every spendable attempt used
    decision = _decide(
        error_code="MODEL_RATE_LIMIT",
        attempt_no=attempt_no,
        max_attempts=max_attempts,
        waived_attempts=waived,
        max_waived_attempts=cap,
    )
    assert decision.waived == (waived < cap)
    assert decision.retry == (waived < cap)

"""Reading providers' x-ratelimit-* headers (runtime_service/rate_limits.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime_service.rate_limits import (
    MAX_COUNT,
    MAX_RESET_MS,
    RateLimitHeaders,
    duration_ms,
    rate_limit_headers,
)
from runtime_service.scheduler_client import rate_limits_message


@pytest.mark.parametrize(
    ("text", "ms"),
    [("1s", 1_000), ("6m0s", 360_000), ("250ms", 250), ("1h2m3.5s", 3_723_500), ("0.5", 500)],
)
def test_reset_durations(text: str, ms: int) -> None:
    assert duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "soon", "5x", "-1", "nan", "1s garbage"])
def test_unreadable_durations_are_none(text: str) -> None:
    assert duration_ms(text) is None


def test_headers_of_an_openai_style_answer() -> None:
    headers = {
        "X-RateLimit-Limit-Requests": "600",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1m0s",
        "x-ratelimit-limit-tokens": "100000",
        "x-ratelimit-remaining-tokens": "99000",
        "x-ratelimit-reset-tokens": "600ms",
        "content-type": "application/json",
    }
    assert rate_limit_headers(headers) == RateLimitHeaders(600, 0, 60_000, 100_000, 99_000, 600)


def test_no_headers_is_none() -> None:
    assert rate_limit_headers({"content-type": "application/json"}) is None


_HEADER_NAMES = [
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
]
_ODD_VALUES = st.one_of(
    st.text(max_size=30),
    st.integers(min_value=0).map(str),
    st.integers(min_value=10**17, max_value=10**400).map(str),
    st.sampled_from(["1e300", "1e300s", "99999999999h", "²", "١٢٣", "-1", "nan", "inf", "0x10"]),
)


@given(st.dictionaries(st.sampled_from(_HEADER_NAMES), _ODD_VALUES))
def test_any_header_value_is_read_or_ignored_never_a_crash_of_the_report(
    headers: dict[str, str],
) -> None:
    """An out-of-range header raised ValueError while the report was built, and a
    successful answer was lost. Whatever a provider sends, the report carries it or omits it."""
    seen = rate_limit_headers(headers)
    if seen is not None:
        message = rate_limits_message(seen)  # what the runtime sends; must not raise
        for name in ("limit_requests", "remaining_requests", "limit_tokens", "remaining_tokens"):
            value = getattr(seen, name)
            assert value is None or 0 <= value <= MAX_COUNT
        assert message.reset_requests.ToMilliseconds() <= MAX_RESET_MS


def test_absurd_values_are_not_believed() -> None:
    assert rate_limit_headers({"x-ratelimit-remaining-requests": "9" * 401}) is None
    assert rate_limit_headers({"x-ratelimit-reset-tokens": "1e300"}) is None
    assert rate_limit_headers({"x-ratelimit-limit-requests": "²"}) is None

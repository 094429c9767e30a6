"""Reading providers' x-ratelimit-* headers (runtime_service/rate_limits.py)."""

from __future__ import annotations

import pytest

from runtime_service.rate_limits import RateLimitHeaders, duration_ms, rate_limit_headers


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

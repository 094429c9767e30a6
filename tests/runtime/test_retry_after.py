"""Reading a provider's Retry-After: seconds become milliseconds, capped; anything unreadable,
negative or not finite is no wait at all, never a crash or a job parked for ever."""

from __future__ import annotations

import pytest

from runtime_service.failures import MAX_RETRY_AFTER_MS, retry_after_ms


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("2.5", 2_500),
        ("0", 0),
        ("-5", 0),
        ("", 0),
        ("nan", 0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0),
        ("1e9", MAX_RETRY_AFTER_MS),
        ("inf", MAX_RETRY_AFTER_MS),
    ],
)
def test_retry_after_header(header: str, expected: int) -> None:
    assert retry_after_ms(header) == expected

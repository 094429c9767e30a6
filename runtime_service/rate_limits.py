"""What a provider's ``x-ratelimit-*`` headers say, read from a model call's answer. Pure.

OpenAI-compatible providers send, with every answer (429s included), the limit, what remains and
when the window resets, for requests and for tokens. The runtime reports them with the attempt's
result or failure, so that the scheduler pauses the model key when none remain — before the 429s.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["RateLimitHeaders", "duration_ms", "rate_limit_headers"]

_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|h|m|s)")
_DIGITS = re.compile(r"[0-9]{1,18}")
#: The largest count taken from a header: more than any real limit, well within an int64. A
#: provider's (or a proxy's) absurd value is not read at all, never allowed to break the report.
MAX_COUNT = 10**15
#: The longest reset window taken from a header: a day; a longer one is not believed.
MAX_RESET_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class RateLimitHeaders:
    """None where the provider sent nothing (or nothing readable)."""

    limit_requests: int | None = None
    remaining_requests: int | None = None
    reset_requests_ms: int | None = None
    limit_tokens: int | None = None
    remaining_tokens: int | None = None
    reset_tokens_ms: int | None = None


def duration_ms(value: str) -> int | None:
    """``6m0s``, ``1s``, ``250ms``, ``1h2m3.5s`` or plain seconds (``0.5``), in milliseconds."""
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        parts = _PART.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            return None
        scale = {"h": 3_600_000, "m": 60_000, "s": 1_000, "ms": 1}
        return _bounded_ms(sum(float(n) * scale[u] for n, u in parts))
    return _bounded_ms(seconds * 1000)


def _bounded_ms(value: float) -> int | None:
    if not math.isfinite(value) or not 0 <= value <= MAX_RESET_MS:
        return None
    return math.ceil(value)


def _count(value: str | None) -> int | None:
    # ASCII digits only: str.isdigit() also takes "²" and other digits int() refuses.
    if value is None or not _DIGITS.fullmatch(value.strip()):
        return None
    count = int(value.strip())
    return count if count <= MAX_COUNT else None


def rate_limit_headers(headers: Mapping[str, str]) -> RateLimitHeaders | None:
    """The rate-limit headers of an answer, or None when it carried none."""
    lower = {key.lower(): value for key, value in headers.items()}

    def reset(name: str) -> int | None:
        value = lower.get(name)
        return None if value is None else duration_ms(value)

    seen = RateLimitHeaders(
        _count(lower.get("x-ratelimit-limit-requests")),
        _count(lower.get("x-ratelimit-remaining-requests")),
        reset("x-ratelimit-reset-requests"),
        _count(lower.get("x-ratelimit-limit-tokens")),
        _count(lower.get("x-ratelimit-remaining-tokens")),
        reset("x-ratelimit-reset-tokens"),
    )
    return None if seen == RateLimitHeaders() else seen

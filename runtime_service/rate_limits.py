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

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


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
        return math.ceil(sum(float(n) * scale[u] for n, u in parts))
    return math.ceil(seconds * 1000) if math.isfinite(seconds) and seconds >= 0 else None


def _count(value: str | None) -> int | None:
    if value is None or not value.strip().isdigit():
        return None
    return int(value.strip())


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

"""When a failed attempt is retried, and after how long. Pure: the caller passes the randomness.

The scheduler is the one retry authority (docs/architecture.md, *Retries and the error
catalogue*): a failure is retried only if the runtime
calls it retryable *and* the catalogue does, while attempts remain (some codes have a lower cap:
INTERNAL_* is retried once). Congestion and shutdowns (codes that do not spend an attempt) go
back unspent, up to a cap of their own. The wait is exponential backoff with full jitter, never
shorter than the provider's Retry-After — which is capped, so that a provider (or a runtime)
cannot park a job for days: a job's time in the queue stays bounded.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from scheduler_service.core.job_definitions import Backoff
from shared.error_codes import spec_of

__all__ = ["MAX_RETRY_AFTER_MS", "MAX_WAIVED_ATTEMPTS", "RetryDecision", "backoff_ms", "decide"]

#: Default cap on a provider's Retry-After (ten minutes).
MAX_RETRY_AFTER_MS = 600_000


#: Default cap on attempts given back unspent (429s, runtime shutdowns) per job: with the
#: Retry-After cap, a job without a deadline still ends within hours, not never.
MAX_WAIVED_ATTEMPTS = 20


@dataclass(frozen=True, slots=True)
class RetryDecision:
    retry: bool
    delay_ms: int = 0
    #: The attempt goes back unspent (its number grows, ``maxAttempts`` is not used up).
    waived: bool = False


def backoff_ms(attempt_no: int, backoff: Backoff, rng: random.Random) -> int:
    """Full-jitter delay before the attempt after ``attempt_no``."""
    ceiling = min(backoff.cap_ms, backoff.base_ms * 2 ** max(0, attempt_no - 1))
    return round(rng.uniform(0, ceiling))


def decide(
    *,
    attempt_no: int,
    max_attempts: int,
    error_code: str,
    retryable: bool,
    retry_after_ms: int,
    backoff: Backoff,
    rng: random.Random,
    max_retry_after_ms: int = MAX_RETRY_AFTER_MS,
    waived_attempts: int = 0,
    max_waived_attempts: int = MAX_WAIVED_ATTEMPTS,
    falls_back: bool = False,
) -> RetryDecision:
    """Whether attempt ``attempt_no`` (of which ``waived_attempts`` earlier ones went back unspent)
    is retried, and after how long. An attempt that ``falls_back`` failed because its model
    key broke, and another tier of its route (or its key, once an operator resets it) takes the
    job: it goes back unspent and at once, up to the waivers' cap; the breakers decide where
    and when it runs next (core/routes.py)."""
    if falls_back and waived_attempts < max_waived_attempts:
        return RetryDecision(retry=True, delay_ms=0, waived=True)
    spec = spec_of(error_code)
    if not (retryable and spec.retryable):
        return RetryDecision(retry=False)
    spent = attempt_no - waived_attempts
    delay = min(retry_after_ms, max_retry_after_ms)
    if not spec.spends_attempt and waived_attempts < max_waived_attempts:
        # The backoff grows with the waivers, so a 429 without Retry-After still backs off.
        return RetryDecision(
            retry=True,
            delay_ms=max(backoff_ms(waived_attempts + 1, backoff, rng), delay),
            waived=True,
        )
    limit = max_attempts if spec.max_attempts is None else min(max_attempts, spec.max_attempts)
    if spent >= limit:
        return RetryDecision(retry=False)
    return RetryDecision(retry=True, delay_ms=max(backoff_ms(spent, backoff, rng), delay))

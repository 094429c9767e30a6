"""A circuit breaker per model key: when a provider's model fails as a provider fails (5xx, 503
"server overloaded", connections refused or dropped, first-token timeouts), calls stop going to
it for a cool-down, after which one probe call decides: success closes it, a failure opens it
again. An account out of balance (402) opens it until an operator resets it. Pure: the state is
a value the store keeps per model key, so every replica and runtime judges by the same one.

A 429 is not a breaker's business: it is flow control (core/model_keys.py pauses the key)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from shared.error_codes import ErrorCode

__all__ = [
    "BREAKING_CODES",
    "Breaker",
    "BreakerKey",
    "BreakerPolicy",
    "BreakerState",
    "admits",
    "after_failure",
    "after_success",
    "reset",
]


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


#: The failures that say the provider (not the job) is failing.
BREAKING_CODES = frozenset(
    {
        ErrorCode.TEMPORARY_PROVIDER_ERROR,
        ErrorCode.NETWORK_ERROR,
        ErrorCode.MODEL_TIMEOUT,
        ErrorCode.MODEL_INSUFFICIENT_BALANCE,
    }
)


@dataclass(frozen=True, slots=True, order=True)
class BreakerKey:
    """A provider's model on one key: the platform's (``credential_id`` empty) or one user's
    stored credential. An alias counts with the model that serves it."""

    provider: str
    model: str
    credential_id: str = ""


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    #: Consecutive provider failures that open a closed breaker.
    failures_to_open: int = 5
    #: How long an open breaker admits nothing before one probe call.
    cool_down: timedelta = timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class Breaker:
    state: BreakerState = BreakerState.CLOSED
    #: Provider failures in a row since the last success.
    failures: int = 0
    #: When it opened (the cool-down counts from it), or when its probe went out.
    since: datetime | None = None
    #: Opened by an answer no wait cures (402): only an operator's reset closes it.
    held: bool = False


def after_failure(breaker: Breaker, code: str, now: datetime, policy: BreakerPolicy) -> Breaker:
    """The breaker after a call failed with ``code``; a failure that is not the provider's
    leaves it as it was."""
    if code not in BREAKING_CODES:
        return breaker
    if code == ErrorCode.MODEL_INSUFFICIENT_BALANCE:
        return Breaker(BreakerState.OPEN, breaker.failures + 1, now, held=True)
    failures = breaker.failures + 1
    if breaker.state is BreakerState.HALF_OPEN or (
        breaker.state is BreakerState.CLOSED and failures >= policy.failures_to_open
    ):
        return Breaker(BreakerState.OPEN, failures, now, held=breaker.held)
    return replace(breaker, failures=failures)


def after_success(breaker: Breaker) -> Breaker:
    """A call answered: the provider is back (a held breaker waits for its operator)."""
    if breaker.held:
        return breaker
    return Breaker()


def admits(breaker: Breaker, now: datetime, policy: BreakerPolicy) -> tuple[bool, Breaker]:
    """Whether a call may go to the key now, and the breaker after it goes: a closed one admits
    every call; an open one none until its cool-down has passed, then one probe (it goes half
    open); a half-open one none but its probe, until that probe's cool-down passes too (a probe
    whose answer never came is not waited for forever). A held breaker admits nothing."""
    if breaker.state is BreakerState.CLOSED:
        return True, breaker
    if breaker.held or breaker.since is None or now < breaker.since + policy.cool_down:
        return False, breaker
    return True, replace(breaker, state=BreakerState.HALF_OPEN, since=now)


def reset(breaker: Breaker) -> Breaker:
    """An operator closes it (the account was topped up)."""
    return Breaker()

"""Model keys and the budgets dispatch may spend on them. Pure: the caller passes the clock.

A model key is (provider, model, whose key pays: ``platform`` or ``user``). Providers limit each
key by calls at once, requests per minute and tokens per minute; a 429 says the key is
congested. For every key the state shared by all replicas (a row, read under its lock by each
claim) holds:

* the limits an operator set (0 or unset: the settings' default; 0 there: none);
* ``paused_until``: after a 429 with Retry-After nobody leases on the key before then;
* ``effective``: the concurrency found by AIMD — halved by a 429 or 503, raised by ``1/effective``
  per success back up to the configured limit (TCP's congestion window, per key);
* two token buckets, requests and tokens, refilled at 90 % of the per-minute rate and holding at
  most a tenth of it, so that no sliding minute ever sees more than the limit (0.9 + 0.1).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

__all__ = [
    "FlowPolicy",
    "KeyState",
    "Limits",
    "ModelKey",
    "admit",
    "after_congestion",
    "after_successes",
    "estimate_tokens",
    "refilled",
    "scope_of",
]

PLATFORM, USER = "platform", "user"
#: Share of the per-minute rate the buckets refill at, and the share they may hold.
RATE_SHARE, BURST_SHARE = 0.9, 0.1


@dataclass(frozen=True, slots=True, order=True)
class ModelKey:
    provider: str
    model: str
    scope: str  # PLATFORM or USER


#: Tokens a prompt template adds around the job's input (instructions, schema), roughly.
PROMPT_OVERHEAD_TOKENS = 500


def estimate_tokens(input_chars: int, max_output_tokens: int) -> int:
    """What a job may spend of a tokens-per-minute limit: its input (four characters a token),
    the template around it and its output cap; providers count the cap against the limit too."""
    return input_chars // 4 + PROMPT_OVERHEAD_TOKENS + max_output_tokens


def scope_of(credential_mode: str, user_key_mode: str) -> str:
    return USER if credential_mode == user_key_mode else PLATFORM


@dataclass(frozen=True, slots=True)
class Limits:
    """0 is no limit."""

    max_concurrency: int = 0
    requests_per_minute: int = 0
    tokens_per_minute: int = 0

    def over(self, default: Limits) -> Limits:
        """These limits, each unset (0) one taken from ``default``."""
        return Limits(
            self.max_concurrency or default.max_concurrency,
            self.requests_per_minute or default.requests_per_minute,
            self.tokens_per_minute or default.tokens_per_minute,
        )

    @property
    def any(self) -> bool:
        return bool(self.max_concurrency or self.requests_per_minute or self.tokens_per_minute)


@dataclass(frozen=True, slots=True)
class FlowPolicy:
    """What dispatch needs to spend model keys: the default limits of a key no operator set."""

    defaults: Limits = Limits()
    user_key_mode: str = "user_deepseek_key"

    def key(self, provider: str, model: str, credential_mode: str) -> ModelKey:
        return ModelKey(provider, model, scope_of(credential_mode, self.user_key_mode))


@dataclass(frozen=True, slots=True)
class KeyState:
    limits: Limits
    paused_until: datetime | None = None
    effective: float | None = None
    request_level: float | None = None
    token_level: float | None = None
    refilled_at: datetime | None = None

    def concurrency(self) -> int:
        """Calls at once allowed now: the configured limit, lowered by congestion."""
        limit = self.limits.max_concurrency
        if self.effective is None:
            return limit
        found = max(1, math.floor(self.effective))
        return min(limit, found) if limit else found


def _bucket(per_minute: int, level: float | None, elapsed_s: float) -> float:
    capacity = max(1.0, BURST_SHARE * per_minute)
    start = capacity if level is None else level
    return min(capacity, start + RATE_SHARE * per_minute / 60 * elapsed_s)


def refilled(state: KeyState, now: datetime) -> KeyState:
    """The buckets topped up for the time since they were last."""
    elapsed = 0.0 if state.refilled_at is None else (now - state.refilled_at).total_seconds()
    elapsed = max(0.0, elapsed)
    limits = state.limits
    return replace(
        state,
        request_level=(
            _bucket(limits.requests_per_minute, state.request_level, elapsed)
            if limits.requests_per_minute
            else None
        ),
        token_level=(
            _bucket(limits.tokens_per_minute, state.token_level, elapsed)
            if limits.tokens_per_minute
            else None
        ),
        refilled_at=now,
    )


def admit(
    candidates: Sequence[tuple[str, ModelKey, int]],
    states: Mapping[ModelKey, KeyState],
    running: Mapping[ModelKey, int],
    now: datetime,
) -> tuple[list[str], dict[ModelKey, KeyState]]:
    """The candidates (job id, key, token estimate), in order, that fit their keys' budgets, and
    the keys' states after spending them. Keys without a state are not limited."""
    spent: dict[ModelKey, KeyState] = {}
    taken: Counter[ModelKey] = Counter(running)
    admitted: list[str] = []
    for job_id, key, tokens in candidates:
        state = spent.get(key) or states.get(key)
        if state is None:
            admitted.append(job_id)
            continue
        if state.refilled_at != now:
            state = refilled(state, now)
        if not _fits(state, taken[key], tokens, now):
            spent[key] = state
            continue
        spent[key] = replace(
            state,
            request_level=None if state.request_level is None else state.request_level - 1,
            token_level=None if state.token_level is None else state.token_level - tokens,
        )
        taken[key] += 1
        admitted.append(job_id)
    return admitted, spent


def _fits(state: KeyState, running: int, tokens: int, now: datetime) -> bool:
    if state.paused_until is not None and state.paused_until > now:
        return False
    concurrency = state.concurrency()
    if concurrency and running >= concurrency:
        return False
    if state.request_level is not None and state.request_level < 1:
        return False
    # A job larger than the whole bucket still runs once the bucket is full.
    capacity = max(1.0, BURST_SHARE * state.limits.tokens_per_minute)
    need = min(float(tokens), capacity)
    return state.token_level is None or state.token_level >= need


def after_congestion(
    state: KeyState, now: datetime, retry_after: timedelta | None, running: int
) -> KeyState:
    """A 429 (with its Retry-After: the key pauses) or a 503: the concurrency halves, from what
    was running when it happened if no window was known yet."""
    window = state.effective if state.effective is not None else float(max(1, running))
    paused = state.paused_until
    if retry_after is not None and retry_after > timedelta(0):
        until = now + retry_after
        paused = until if paused is None or paused < until else paused
    return replace(state, effective=max(1.0, window / 2), paused_until=paused)


def after_successes(state: KeyState, count: int) -> KeyState:
    """``count`` calls succeeded: additive increase, ``1/effective`` each, up to the limit."""
    if state.effective is None:
        return state
    window = state.effective
    for _ in range(count):
        window += 1 / window
    limit = state.limits.max_concurrency
    if limit and window >= limit:
        return replace(state, effective=None)  # back at the configured limit
    return replace(state, effective=window)

"""Model keys and the budgets dispatch may spend on them. Pure: the caller passes the clock.

A model key is (provider, model, whose key pays: ``platform`` or ``user``). Providers limit each
key by calls at once, requests per minute and tokens per minute; a 429 says the key is
congested. For every key the state shared by all replicas (a row, read under its lock by each
claim) holds:

* the limits an operator set (0 or unset: the settings' default; 0 there: none);
* ``paused_until``: after a 429 with Retry-After nobody leases on the key before then;
* ``effective``: the concurrency found by AIMD — halved by a 429 or 503, raised by ``1/effective``
  per success back up to the configured limit (TCP's congestion window, per key);
* two sliding windows, requests and tokens started per whole second over the last 61 seconds:
  a lease is given while the window holds less than the per-minute limit, so no continuous
  minute — the window providers count in — ever sees more than the limit, and a burst the
  provider would accept (300 calls against 600 a minute) is not held back.
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
    "paused",
    "scope_of",
    "spent",
    "trimmed",
]

PLATFORM, USER = "platform", "user"
#: Whole seconds a window counts: a continuous minute touches at most 61 of them.
WINDOW_SECONDS = 61

#: (epoch second, amount) pairs, oldest first.
Window = tuple[tuple[int, int], ...]


def second_of(now: datetime) -> int:
    return math.floor(now.timestamp())


def trimmed(window: Window, now: datetime) -> Window:
    """The window without the seconds that left it."""
    oldest = second_of(now) - WINDOW_SECONDS
    return tuple(entry for entry in window if entry[0] > oldest)


def spent(window: Window) -> int:
    return sum(amount for _, amount in window)


def _added(window: Window, now: datetime, amount: int) -> Window:
    second = second_of(now)
    if window and window[-1][0] == second:
        return (*window[:-1], (second, window[-1][1] + amount))
    return (*window, (second, amount))


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
    #: Leases started, and the tokens they may spend, per second of the last minute.
    requests: Window = ()
    tokens: Window = ()
    #: 429s reported per second of the last minute.
    rate_limited: Window = ()

    def concurrency(self) -> int:
        """Calls at once allowed now: the configured limit, lowered by congestion."""
        limit = self.limits.max_concurrency
        if self.effective is None:
            return limit
        found = max(1, math.floor(self.effective))
        return min(limit, found) if limit else found


def admit(
    candidates: Sequence[tuple[str, ModelKey, int]],
    states: Mapping[ModelKey, KeyState],
    running: Mapping[ModelKey, int],
    now: datetime,
    wanted: int | None = None,
) -> tuple[list[str], dict[ModelKey, KeyState]]:
    """The candidates (job id, key, token estimate), in order, that fit their keys' budgets — at
    most ``wanted`` of them — and the keys' states after spending them. Keys without a state are
    not limited."""
    used: dict[ModelKey, KeyState] = {}
    taken: Counter[ModelKey] = Counter(running)
    admitted: list[str] = []
    for job_id, key, tokens in candidates:
        if wanted is not None and len(admitted) == wanted:
            break
        state = used.get(key)
        if state is None:
            if key not in states:
                admitted.append(job_id)
                continue
            state = states[key]
            state = replace(
                state, requests=trimmed(state.requests, now), tokens=trimmed(state.tokens, now)
            )
        used[key] = state
        if not _fits(state, taken[key], tokens, now):
            continue
        used[key] = replace(
            state,
            requests=_added(state.requests, now, 1),
            tokens=_added(state.tokens, now, tokens),
        )
        taken[key] += 1
        admitted.append(job_id)
    return admitted, used


def _fits(state: KeyState, running: int, tokens: int, now: datetime) -> bool:
    if state.paused_until is not None and state.paused_until > now:
        return False
    concurrency = state.concurrency()
    if concurrency and running >= concurrency:
        return False
    limits = state.limits
    if limits.requests_per_minute and spent(state.requests) >= limits.requests_per_minute:
        return False
    if not limits.tokens_per_minute:
        return True
    used = spent(state.tokens)
    # A job larger than the whole limit still runs, alone in its minute.
    return used + tokens <= limits.tokens_per_minute or used == 0


def after_congestion(
    state: KeyState, now: datetime, retry_after: timedelta | None, running: int
) -> KeyState:
    """A 429 (with its Retry-After: the key pauses) or a 503: the concurrency halves, from what
    was running when it happened if no window was known yet."""
    window = state.effective if state.effective is not None else float(max(1, running))
    paused, limited = state.paused_until, trimmed(state.rate_limited, now)
    if retry_after is not None:
        limited = _added(limited, now, 1)
        until = now + retry_after
        paused = until if paused is None or paused < until else paused
    return replace(state, effective=max(1.0, window / 2), paused_until=paused, rate_limited=limited)


def paused(state: KeyState, now: datetime, pause: timedelta) -> KeyState:
    """No lease on the key before ``now + pause`` (a later pause already set stays)."""
    until = now + pause
    if state.paused_until is not None and state.paused_until >= until:
        return state
    return replace(state, paused_until=until)


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

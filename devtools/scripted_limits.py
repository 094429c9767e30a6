"""Provider-style limits for the scripted model: requests and tokens per minute and concurrent
calls, per API key, answered the way OpenAI-compatible providers answer them (429, Retry-After and
the ``x-ratelimit-*`` headers). Pure: the caller passes the clock."""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass, field

__all__ = ["Admission", "KeyLimits", "ProviderLimits", "reset_text"]

WINDOW_S = 60.0


@dataclass(frozen=True, slots=True)
class KeyLimits:
    """0 means no limit."""

    rpm: int = 0
    tpm: int = 0
    concurrency: int = 0


@dataclass(frozen=True, slots=True)
class Admission:
    admitted: bool
    #: Seconds until a refused request could be admitted (Retry-After); 0 when admitted.
    retry_after_s: float
    headers: dict[str, str]


@dataclass
class _KeyState:
    requests: deque[float] = field(default_factory=deque)
    tokens: deque[tuple[float, int]] = field(default_factory=deque)
    in_progress: int = 0


def reset_text(seconds: float) -> str:
    """OpenAI's reset format: ``1s``, ``6m0s``, ``250ms``."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    whole = math.ceil(seconds)
    minutes, rest = divmod(whole, 60)
    return f"{minutes}m{rest}s" if minutes else f"{rest}s"


class ProviderLimits:
    """Sliding one-minute windows of requests and tokens, and a count of calls in progress, per
    key. ``admit`` either takes a place (release it with ``done``) or says when to come back."""

    def __init__(self, limits: KeyLimits) -> None:
        self.limits = limits
        self._keys: dict[str, _KeyState] = {}
        self._lock = threading.Lock()

    def admit(self, key: str, tokens: int, now: float) -> Admission:
        with self._lock:
            state = self._keys.setdefault(key, _KeyState())
            self._expire(state, now)
            waits = self._waits(state, tokens, now)
            if not waits:
                state.requests.append(now)
                state.tokens.append((now, tokens))
                state.in_progress += 1
            return Admission(not waits, max(waits, default=0.0), self._headers(state, now))

    def done(self, key: str) -> None:
        with self._lock:
            self._keys[key].in_progress -= 1

    def in_progress(self, key: str) -> int:
        with self._lock:
            state = self._keys.get(key)
            return state.in_progress if state else 0

    def _waits(self, state: _KeyState, tokens: int, now: float) -> list[float]:
        limits, waits = self.limits, []
        if limits.concurrency and state.in_progress >= limits.concurrency:
            waits.append(1.0)  # a place frees when a call ends; a second is the usual advice
        if limits.rpm and len(state.requests) >= limits.rpm:
            waits.append(state.requests[0] + WINDOW_S - now)
        if limits.tpm and _used(state) + tokens > limits.tpm:
            waits.append(_tokens_free_after(state, tokens, limits.tpm, now))
        return waits

    def _headers(self, state: _KeyState, now: float) -> dict[str, str]:
        headers: dict[str, str] = {}
        if self.limits.rpm:
            reset = state.requests[0] + WINDOW_S - now if state.requests else 0.0
            headers |= {
                "x-ratelimit-limit-requests": str(self.limits.rpm),
                "x-ratelimit-remaining-requests": str(
                    max(0, self.limits.rpm - len(state.requests))
                ),
                "x-ratelimit-reset-requests": reset_text(reset),
            }
        if self.limits.tpm:
            reset = state.tokens[0][0] + WINDOW_S - now if state.tokens else 0.0
            headers |= {
                "x-ratelimit-limit-tokens": str(self.limits.tpm),
                "x-ratelimit-remaining-tokens": str(max(0, self.limits.tpm - _used(state))),
                "x-ratelimit-reset-tokens": reset_text(reset),
            }
        return headers

    @staticmethod
    def _expire(state: _KeyState, now: float) -> None:
        while state.requests and state.requests[0] <= now - WINDOW_S:
            state.requests.popleft()
        while state.tokens and state.tokens[0][0] <= now - WINDOW_S:
            state.tokens.popleft()


def _used(state: _KeyState) -> int:
    return sum(count for _, count in state.tokens)


def _tokens_free_after(state: _KeyState, tokens: int, limit: int, now: float) -> float:
    """Seconds until enough of the window's tokens expire for ``tokens`` more to fit."""
    used = _used(state)
    for at, count in state.tokens:
        used -= count
        if used + tokens <= limit:
            return at + WINDOW_S - now
    return WINDOW_S  # larger than the whole limit: never fits; a minute is the honest answer

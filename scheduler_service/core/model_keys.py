"""Model keys and the budgets dispatch may spend on them. Pure: the caller passes the clock.

A model key is (provider, model, whose key pays: ``platform`` or ``user``). Providers limit each
key by calls at once, requests per minute and tokens per minute; a 429 says the key is
congested. For every key the state shared by all replicas (a row, read under its lock by each
claim) holds:

* the limits an operator set (0 or unset: the settings' default; 0 there: none);
* ``paused_until``: after a 429 with Retry-After nobody leases on the key before then;
* ``effective``: the concurrency found by AIMD — halved by a 429, a 503 or a first token slower
  than ``latency_tolerance`` x the key's baseline, raised by ``1/effective`` per success back up
  to the configured limit (TCP's congestion window, per key). A key no operator gave a
  concurrency starts at ``initial_concurrency`` and doubles per round of successes (TCP's slow
  start) until the provider first pushes back, so a fleet of 48 slots does not open 48 calls on
  a provider that serves 8 and holds the rest;
* ``first_tokens``: the fastest time to first token of each of the last minutes — the baseline a
  call's first token is judged against (a windowed minimum, as BBR reads a path's round trip:
  every decrease drains the queue, so a minute at the true floor comes back);
* two sliding windows, requests and tokens started per whole second over the last 61 seconds:
  a lease is given while the window holds less than the per-minute limit, so no continuous
  minute — the window providers count in — ever sees more than the limit, and a burst the
  provider would accept (300 calls against 600 a minute) is not held back.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from shared.model_catalogue import canonical_model

__all__ = [
    "Answered",
    "FlowPolicy",
    "KeyState",
    "KeyStats",
    "ModelKey",
    "ModelKeyLimits",
    "admit",
    "after_answers",
    "after_congestion",
    "baseline_ms",
    "claim_locks",
    "estimate_tokens",
    "key_model",
    "paused",
    "restricts",
    "scope_of",
    "spent",
    "trimmed",
    "within_user_caps",
]

PLATFORM, USER = "platform", "user"
#: Whole seconds a window counts: a continuous minute touches at most 61 of them.
WINDOW_SECONDS = 61

#: (epoch second, amount) pairs, oldest first.
Window = tuple[tuple[int, int], ...]
#: Minutes whose fastest first token the latency baseline remembers.
BASELINE_MINUTES = 5
#: A first token later than the baseline by no more than this is the host's jitter, not a queue
#: at the provider: a fast or local model's baseline of a few milliseconds would otherwise halve
#: its key's window at every hiccup of the runtime's machine.
LATENCY_SLACK_MS = 100
#: A key without a limit runs unlimited again once its window grows past this many calls (until
#: the provider pushes back), and a slow start that met no congestion ends here whatever the
#: limit, so that a settled key costs no write per success.
PROBE_CEILING = 256


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


def key_model(model: str) -> str:
    """The model a key counts calls of: an alias counts with the model that serves it (DeepSeek
    limits concurrency per model, whichever name the request used)."""
    return canonical_model(model)


@dataclass(frozen=True, slots=True)
class ModelKeyLimits:
    """0 is no limit."""

    max_concurrency: int = 0
    requests_per_minute: int = 0
    tokens_per_minute: int = 0
    #: What the key may cost per UTC day, platform-wide, in micro-units of the price table.
    daily_cost_micros: int = 0
    #: Calls of one end user at once on the key.
    max_concurrency_per_user: int = 0

    def over(self, default: ModelKeyLimits) -> ModelKeyLimits:
        """These limits, each unset (0) one taken from ``default``."""
        return ModelKeyLimits(
            self.max_concurrency or default.max_concurrency,
            self.requests_per_minute or default.requests_per_minute,
            self.tokens_per_minute or default.tokens_per_minute,
            self.daily_cost_micros or default.daily_cost_micros,
            self.max_concurrency_per_user or default.max_concurrency_per_user,
        )

    @property
    def any(self) -> bool:
        return bool(
            self.max_concurrency
            or self.requests_per_minute
            or self.tokens_per_minute
            or self.daily_cost_micros
            or self.max_concurrency_per_user
        )


@dataclass(frozen=True, slots=True)
class FlowPolicy:
    """What dispatch needs to spend model keys: the default limits of a key no operator set."""

    defaults: ModelKeyLimits = ModelKeyLimits()
    user_key_mode: str = "user_deepseek_key"
    #: The window a key without a concurrency limit starts at (0: unlimited until congestion).
    initial_concurrency: int = 0
    #: A first token slower than this many times the key's baseline is congestion (0: never).
    latency_tolerance: float = 0.0
    #: Calls at once per (provider, model) that the provider documents for one account, across
    #: all its API keys: the concurrency of a platform key neither an operator nor the settings
    #: limited (a user's own key belongs to another account, which the provider limits alone).
    account_concurrency: Mapping[tuple[str, str], int] = field(default_factory=dict)

    @property
    def keeps_rows(self) -> bool:
        """Every key dispatch meets needs a state row (defaults to spend, or a window to grow)."""
        return self.defaults.any or self.initial_concurrency > 0 or bool(self.account_concurrency)

    @property
    def limits_by_default(self) -> bool:
        """Keys nobody limited have strict limits all the same (the settings' defaults): a
        claim may take the keys' locks without a look first."""
        return self.defaults.any

    def limits(self, key: ModelKey, set_limits: ModelKeyLimits) -> ModelKeyLimits:
        """A key's limits in force: those an operator set, each unset one from the settings'
        defaults, and a platform key's concurrency, when neither names one, the account's."""
        limits = set_limits.over(self.defaults)
        if limits.max_concurrency or key.scope != PLATFORM:
            return limits
        documented = self.account_concurrency.get((key.provider, key.model), 0)
        return replace(limits, max_concurrency=documented) if documented else limits

    def account_limited(self, key: ModelKey, set_limits: ModelKeyLimits) -> bool:
        """Whether the key's concurrency in force is the account's (``limits``)."""
        return not set_limits.over(self.defaults).max_concurrency and bool(
            self.limits(key, set_limits).max_concurrency
        )

    def fresh(self) -> float | None:
        """The window a new key's row starts with."""
        if self.defaults.max_concurrency or not self.initial_concurrency:
            return None
        return float(self.initial_concurrency)

    def key(self, provider: str, model: str, credential_mode: str) -> ModelKey:
        return ModelKey(provider, key_model(model), scope_of(credential_mode, self.user_key_mode))


@dataclass(frozen=True, slots=True)
class KeyState:
    limits: ModelKeyLimits
    paused_until: datetime | None = None
    effective: float | None = None
    #: Leases started, and the tokens they may spend, per second of the last minute.
    requests: Window = ()
    tokens: Window = ()
    #: 429s reported per second of the last minute.
    rate_limited: Window = ()
    #: Below it the window doubles per round of successes (slow start); above, it grows by one
    #: per round. Set by each decrease; None: no congestion seen yet.
    threshold: float | None = None
    #: (epoch minute, fastest first token in ms) of the last BASELINE_MINUTES.
    first_tokens: Window = ()
    #: The last decrease: calls leased before it were already in flight and judge nothing.
    decreased_at: datetime | None = None
    #: What the key's calls cost so far on the current UTC day.
    cost_today: int = 0
    #: The concurrency limit is the account's as the provider documents it, not one an operator
    #: or the settings chose: claims keep to it by the running count they read, without the
    #: key's lock, so concurrent claims of two replicas may pass it by the size of one of them
    #: (the provider answers 429 beyond it, and the window halves). Far above what a fleet runs,
    #: it must not make every claim of every replica wait for the others.
    account_limited: bool = False

    def concurrency(self) -> int:
        """Calls at once allowed now: the configured limit, lowered by congestion."""
        limit = self.limits.max_concurrency
        if self.effective is None:
            return limit
        found = max(1, math.floor(self.effective))
        return min(limit, found) if limit else found


def restricts(state: KeyState, now: datetime) -> bool:
    """Whether the key may refuse a lease now, beyond a running count: a limit (the operator's
    or the default; the account's is kept by count alone), a congestion window, or a pause."""
    limits = replace(state.limits, max_concurrency=0) if state.account_limited else state.limits
    return (
        limits.any
        or state.effective is not None
        or (state.paused_until is not None and state.paused_until > now)
    )


def claim_locks(state: KeyState, now: datetime) -> bool:
    """Whether a claim must hold the key's row lock: the key may refuse a lease, or the claim
    will write its state (per-second counts left from a limit since removed, which ``admit``
    clears). A claim admits on any other key without the lock, and writes nothing to it."""
    return restricts(state, now) or bool(state.requests or state.tokens)


def within_user_caps(
    candidates: Sequence[tuple[str, ModelKey, int]],
    users: Mapping[str, str],
    caps: Mapping[ModelKey, int],
    running: Mapping[tuple[str, ModelKey], int],
) -> list[tuple[str, ModelKey, int]]:
    """The candidates (job id, key, token estimate), in order, whose user stays within their
    key's cap of calls at once per user (``caps``; 0: none), counting the jobs ``running`` per
    (user, key) and those admitted before them; ``users`` maps job id to user."""
    taken: Counter[tuple[str, ModelKey]] = Counter(running)
    kept = []
    for job_id, key, tokens in candidates:
        slot = (users[job_id], key)
        cap = caps.get(key, 0)
        if cap and taken[slot] >= cap:
            continue
        taken[slot] += 1
        kept.append((job_id, key, tokens))
    return kept


def admit(
    candidates: Sequence[tuple[str, ModelKey, int]],
    states: Mapping[ModelKey, KeyState],
    running: Mapping[ModelKey, int],
    now: datetime,
    wanted: int | None = None,
) -> tuple[list[str], dict[ModelKey, KeyState]]:
    """The candidates (job id, key, token estimate), in order, that fit their keys' budgets — at
    most ``wanted`` of them — and the states of the keys they changed (the others need no write).
    Keys without a state are not limited."""
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
        # Only a limit reads its window: a key without one keeps no counts to write each round.
        limits = state.limits
        used[key] = replace(
            state,
            requests=_added(state.requests, now, 1) if limits.requests_per_minute else (),
            tokens=_added(state.tokens, now, tokens) if limits.tokens_per_minute else (),
        )
        taken[key] += 1
        admitted.append(job_id)
    return admitted, {key: state for key, state in used.items() if state != states[key]}


def _fits(state: KeyState, running: int, tokens: int, now: datetime) -> bool:
    if state.paused_until is not None and state.paused_until > now:
        return False
    if state.limits.daily_cost_micros and state.cost_today >= state.limits.daily_cost_micros:
        return False  # the platform's daily cap for the key is spent: nothing until midnight
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
    paused, limited = state.paused_until, trimmed(state.rate_limited, now)
    if retry_after is not None:
        limited = _added(limited, now, 1)
        until = now + retry_after
        paused = until if paused is None or paused < until else paused
    return replace(_decreased(state, now, running), paused_until=paused, rate_limited=limited)


def _decreased(state: KeyState, now: datetime, running: int) -> KeyState:
    """Multiplicative decrease: half the window (or of the limit, or of what runs, when no window
    was known yet); growth above it is additive from now on. An account's documented
    concurrency is no window: far above what runs when the provider pushes back, half of it
    would lower nothing."""
    if state.effective is not None:
        window = state.effective
    elif state.limits.max_concurrency and not state.account_limited:
        window = float(state.limits.max_concurrency)
    else:
        window = float(max(1, running))
    halved = max(1.0, window / 2)
    return replace(state, effective=halved, threshold=halved, decreased_at=now)


def paused(state: KeyState, now: datetime, pause: timedelta) -> KeyState:
    """No lease on the key before ``now + pause`` (a later pause already set stays)."""
    until = now + pause
    if state.paused_until is not None and state.paused_until >= until:
        return state
    return replace(state, paused_until=until)


@dataclass(frozen=True, slots=True)
class Answered:
    """A call that answered: when its lease began, and its time to first token (None: unknown)."""

    leased_at: datetime | None
    first_token_ms: int | None = None


def _minute_of(now: datetime) -> int:
    return second_of(now) // 60


def baseline_ms(state: KeyState, now: datetime) -> int | None:
    """The fastest first token of the last BASELINE_MINUTES, or None before any."""
    oldest = _minute_of(now) - BASELINE_MINUTES
    kept = [ms for minute, ms in state.first_tokens if minute > oldest]
    return min(kept) if kept else None


def _with_first_tokens(state: KeyState, calls: Sequence[Answered], now: datetime) -> KeyState:
    times = [c.first_token_ms for c in calls if c.first_token_ms is not None]
    if not times:
        return state
    minute, fastest = _minute_of(now), min(times)
    window = tuple(e for e in state.first_tokens if e[0] > minute - BASELINE_MINUTES)
    if window and window[-1][0] == minute:
        if window[-1][1] <= fastest:
            return replace(state, first_tokens=window)
        window = window[:-1]
    return replace(state, first_tokens=(*window, (minute, fastest)))


def slowed(state: KeyState, calls: Sequence[Answered], now: datetime, tolerance: float) -> bool:
    """Some call leased since the last decrease waited for its first token longer than
    ``tolerance`` times the baseline, and by more than LATENCY_SLACK_MS: the provider is queueing
    calls (held open, or slower)."""
    baseline = baseline_ms(state, now)
    if not tolerance or baseline is None:
        return False
    slow = max(tolerance * baseline, baseline + LATENCY_SLACK_MS)
    return any(
        c.first_token_ms is not None and c.first_token_ms > slow
        for c in _since_decrease(state, calls)
    )


def _since_decrease(state: KeyState, calls: Sequence[Answered]) -> list[Answered]:
    # Strictly after: a lease stamped in the decrease's own millisecond was most likely given
    # before it (the report that caused it had to travel first).
    since = state.decreased_at
    return [c for c in calls if since is None or c.leased_at is None or c.leased_at > since]


def after_answers(
    state: KeyState,
    calls: Sequence[Answered],
    now: datetime,
    *,
    tolerance: float,
    running: int = 0,
) -> KeyState:
    """Calls answered: a slow first token halves the window (once per round: calls leased
    before the last decrease judge nothing); otherwise each success grows it — by one below the
    threshold (slow start), by ``1/window`` above — up to the configured limit (or, with none,
    PROBE_CEILING), past which the key runs at its limit again (unlimited with none), so that a
    settled key costs no write per success; a slow start that met no congestion stops probing at
    PROBE_CEILING whatever the limit. The first tokens join the baseline."""
    if slowed(state, calls, now, tolerance):
        return _with_first_tokens(_decreased(state, now, running), calls, now)
    return _with_first_tokens(_grown(state, len(_since_decrease(state, calls))), calls, now)


def _grown(state: KeyState, successes: int) -> KeyState:
    if state.effective is None or not successes:
        return state
    window, threshold = state.effective, state.threshold
    for _ in range(successes):
        window += 1 if threshold is None or window < threshold else 1 / window
    ceiling = state.limits.max_concurrency or PROBE_CEILING
    if threshold is None:
        # Slow start, no congestion seen yet: a limit as high as an account's documented
        # concurrency (2,500) would take that many successes, each a write.
        ceiling = min(ceiling, PROBE_CEILING)
    if window >= ceiling:
        return replace(state, effective=None)  # back at the configured limit, or unlimited
    return replace(state, effective=window)


@dataclass(frozen=True, slots=True)
class KeyStats:
    key: ModelKey
    limits: ModelKeyLimits  # as set; 0 takes the default
    in_flight: int
    effective_concurrency: int  # 0: none
    paused_until: datetime | None
    rate_limited_total: int
    rate_limited_last_minute: int
    cost_today_micros: int

"""Model-key budgets (scheduler_service/core/model_keys.py): pauses, AIMD concurrency, buckets."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_service.core.model_keys import (
    LATENCY_SLACK_MS,
    PROBE_CEILING,
    Answered,
    FlowPolicy,
    KeyState,
    ModelKey,
    ModelKeyLimits,
    admit,
    after_answers,
    after_congestion,
    baseline_ms,
    claim_locks,
    restricts,
    spent,
    trimmed,
)

NOW = datetime(2026, 12, 1, tzinfo=UTC)
#: A lease given after a decrease made at NOW.
AFTER = NOW + timedelta(milliseconds=1)
A = ModelKey("deepseek", "deepseek-chat", "platform")
B = ModelKey("deepseek", "deepseek-reasoner", "platform")


def _jobs(key: ModelKey, count: int, tokens: int = 100) -> list[tuple[str, ModelKey, int]]:
    return [(f"{key.model}-{n}", key, tokens) for n in range(count)]


def test_the_account_concurrency_fills_only_a_platform_key_nobody_limited() -> None:
    flow = FlowPolicy(
        ModelKeyLimits(requests_per_minute=60),
        account_concurrency={("deepseek", "deepseek-v4-pro"): 500},
    )
    pro = ModelKey("deepseek", "deepseek-v4-pro", "platform")
    assert flow.limits(pro, ModelKeyLimits()) == ModelKeyLimits(
        max_concurrency=500, requests_per_minute=60
    )
    assert flow.limits(pro, ModelKeyLimits(max_concurrency=7)).max_concurrency == 7  # an operator's
    assert (
        flow.limits(replace(pro, scope="user"), ModelKeyLimits()).max_concurrency == 0
    )  # own account
    assert flow.limits(A, ModelKeyLimits()).max_concurrency == 0  # a model the table does not list
    limited = FlowPolicy(
        ModelKeyLimits(max_concurrency=9), account_concurrency=flow.account_concurrency
    )
    assert limited.limits(pro, ModelKeyLimits()).max_concurrency == 9  # the settings' default first


def test_a_paused_key_leases_nothing_and_others_go_on() -> None:
    paused = KeyState(ModelKeyLimits(), paused_until=NOW + timedelta(seconds=3))
    admitted, _ = admit(_jobs(A, 3) + _jobs(B, 2), {A: paused}, {}, NOW)
    assert admitted == ["deepseek-reasoner-0", "deepseek-reasoner-1"]
    admitted, _ = admit(_jobs(A, 3), {A: paused}, {}, NOW + timedelta(seconds=3, microseconds=1))
    assert len(admitted) == 3


def test_concurrency_counts_what_runs() -> None:
    state = KeyState(ModelKeyLimits(max_concurrency=4))
    admitted, _ = admit(_jobs(A, 10), {A: state}, {A: 3}, NOW)
    assert len(admitted) == 1


def test_a_429_halves_the_concurrency_and_successes_bring_it_back() -> None:
    state = KeyState(ModelKeyLimits(max_concurrency=8))
    congested = after_congestion(state, NOW, timedelta(seconds=3), running=8)
    assert congested.concurrency() == 4
    assert congested.paused_until == NOW + timedelta(seconds=3)
    recovered = _succeeded(congested, 40, AFTER)
    assert recovered.concurrency() == 8 and recovered.effective is None


def _succeeded(state: KeyState, count: int, leased_at: datetime, ms: int | None = None) -> KeyState:
    calls = [Answered(leased_at, ms)] * count
    return after_answers(state, calls, leased_at + timedelta(seconds=1), tolerance=1.5)


def test_a_fresh_window_doubles_per_round_until_congestion_then_grows_by_one() -> None:
    state = KeyState(ModelKeyLimits(), effective=4.0)
    state = _succeeded(state, 4, NOW)
    assert state.concurrency() == 8  # slow start: one more per success
    state = after_congestion(state, NOW, None, running=8)
    assert (state.concurrency(), state.threshold) == (4, 4.0)
    assert _succeeded(state, 4, AFTER).concurrency() == 4
    assert _succeeded(state, 5, AFTER).concurrency() == 5  # above it: about one more per round


def test_calls_in_flight_at_a_decrease_judge_nothing() -> None:
    state = after_congestion(KeyState(ModelKeyLimits(), effective=8.0), NOW, None, running=8)
    assert _succeeded(state, 10, NOW) == state
    assert _succeeded(state, 10, AFTER).concurrency() > 4


def _with_baseline(state: KeyState, ms: int) -> KeyState:
    return after_answers(state, [Answered(NOW, ms)], NOW, tolerance=1.5)


def test_a_slow_first_token_halves_the_window_once_per_round() -> None:
    state = _with_baseline(KeyState(ModelKeyLimits(), effective=16.0), 200)
    assert baseline_ms(state, NOW) == 200
    within = after_answers(state, [Answered(NOW, 300)], NOW, tolerance=1.5)
    assert within.concurrency() == 18 and within.decreased_at is None  # 1.5 x: not yet
    later = NOW + timedelta(seconds=2)
    slow = after_answers(state, [Answered(NOW, 301), Answered(NOW, 900)], later, tolerance=1.5)
    assert (slow.concurrency(), slow.decreased_at) == (8, later)
    # The other calls of that round, leased before the decrease, answer slow too: no second cut.
    again = after_answers(slow, [Answered(NOW, 900)] * 5, later, tolerance=1.5)
    assert again.concurrency() == 8
    # A call leased after it that still waits: the window halves again.
    leased = later + timedelta(milliseconds=1)
    after = after_answers(slow, [Answered(leased, 900)], leased, tolerance=1.5)
    assert after.concurrency() == 4


def test_a_key_without_window_or_limit_halves_what_runs() -> None:
    state = _with_baseline(KeyState(ModelKeyLimits()), 200)
    slow = after_answers(state, [Answered(NOW, 600)], NOW, tolerance=1.5, running=30)
    assert slow.concurrency() == 15
    limited = _with_baseline(KeyState(ModelKeyLimits(max_concurrency=12)), 200)
    assert after_answers(limited, [Answered(NOW, 600)], NOW, tolerance=1.5).concurrency() == 6


def test_the_baseline_is_the_fastest_first_token_of_the_last_minutes() -> None:
    state = _with_baseline(KeyState(ModelKeyLimits(), effective=4.0), 200)
    state = after_answers(state, [Answered(NOW, 250)], NOW + timedelta(minutes=2), tolerance=1.5)
    assert baseline_ms(state, NOW + timedelta(minutes=4)) == 200
    # Five minutes on, the 200 ms minute is forgotten: a provider that became slower for good
    # is judged against what it does now.
    assert baseline_ms(state, NOW + timedelta(minutes=5)) == 250
    assert baseline_ms(state, NOW + timedelta(minutes=7)) is None
    assert after_answers(state, [Answered(NOW, 250)], NOW, tolerance=0).decreased_at is None


def test_an_unlimited_key_stops_counting_past_the_probe_ceiling() -> None:
    state = _succeeded(KeyState(ModelKeyLimits(), effective=4.0), PROBE_CEILING, NOW)
    assert state.effective is None and state.concurrency() == 0


def test_a_slow_start_below_a_high_limit_ends_at_the_probe_ceiling() -> None:
    """An account's documented 2,500 is not probed a success (and a write) at a time; after a
    decrease the window grows additively to the limit as before."""
    state = _succeeded(
        KeyState(ModelKeyLimits(max_concurrency=2_500), effective=4.0), PROBE_CEILING, NOW
    )
    assert state.effective is None and state.concurrency() == 2_500
    congested = KeyState(ModelKeyLimits(max_concurrency=1_000), effective=300.0, threshold=300.0)
    assert _succeeded(congested, 1, NOW).effective == pytest.approx(300 + 1 / 300)


@settings(max_examples=50, deadline=None)
@given(
    st.integers(min_value=0, max_value=64),
    st.lists(st.tuples(st.booleans(), st.integers(min_value=0, max_value=20)), max_size=60),
)
def test_the_window_stays_between_one_and_the_limit(
    limit: int, rounds: list[tuple[bool, int]]
) -> None:
    state = _with_baseline(KeyState(ModelKeyLimits(max_concurrency=limit), effective=4.0), 100)
    for n, (slow, count) in enumerate(rounds):
        at = NOW + timedelta(seconds=n)
        calls = [Answered(at, 1_000 if slow else 100)] * count
        state = after_answers(state, calls, at, tolerance=1.5, running=count)
        window = state.concurrency()
        assert window >= 1 or (window == 0 and not limit and state.effective is None)
        assert not limit or window <= limit


def test_a_503_lowers_without_pausing() -> None:
    congested = after_congestion(KeyState(ModelKeyLimits()), NOW, None, running=6)
    assert (congested.concurrency(), congested.paused_until) == (3, None)


def test_pushback_under_the_accounts_concurrency_halves_what_runs() -> None:
    """2,500 documented, 40 running when DeepSeek pushes back: the window is 20, not 1,250."""
    account = KeyState(ModelKeyLimits(max_concurrency=2_500), account_limited=True)
    assert after_congestion(account, NOW, None, running=40).concurrency() == 20
    chosen = KeyState(ModelKeyLimits(max_concurrency=2_500))  # an operator's limit: halved as set
    assert after_congestion(chosen, NOW, None, running=40).concurrency() == 1_250


@settings(max_examples=50, deadline=None)
@given(
    st.integers(min_value=6, max_value=600),
    st.lists(st.floats(min_value=0, max_value=5), min_size=1, max_size=120),
)
def test_no_sliding_minute_sees_more_requests_than_the_limit(rpm: int, gaps: list[float]) -> None:
    """Claim as much as the bucket allows at each moment: the leases of any 60 s stay within
    requests_per_minute."""
    state = KeyState(ModelKeyLimits(requests_per_minute=rpm))
    now, starts = NOW, []
    for gap in gaps:
        now += timedelta(seconds=gap)
        admitted, spent = admit(_jobs(A, rpm), {A: state}, {}, now)
        state = spent.get(A, state)  # unchanged: nothing to write
        starts += [now] * len(admitted)
    for index, start in enumerate(starts):
        window = [s for s in starts[index:] if s < start + timedelta(seconds=60)]
        assert len(window) <= rpm


def test_tokens_per_minute_bound_large_jobs() -> None:
    state = KeyState(ModelKeyLimits(tokens_per_minute=1_000))
    admitted, spent = admit(_jobs(A, 5, tokens=400), {A: state}, {}, NOW)
    assert len(admitted) == 2
    assert admit(_jobs(A, 5, tokens=400), spent, {}, NOW + timedelta(seconds=60))[0] == []
    later, _ = admit(_jobs(A, 5, tokens=400), spent, {}, NOW + timedelta(seconds=61))
    assert len(later) == 2  # the first minute's tokens left the window
    (alone,), _ = admit(_jobs(A, 2, tokens=5_000), {A: state}, {}, NOW)
    assert alone == "deepseek-chat-0"  # larger than the limit: runs, alone in its minute


def test_a_burst_the_provider_accepts_is_not_held_back() -> None:
    state = KeyState(ModelKeyLimits(requests_per_minute=600))
    admitted, _ = admit(_jobs(A, 300), {A: state}, {}, NOW)
    assert len(admitted) == 300


def test_429s_are_counted_per_last_minute() -> None:
    state = KeyState(ModelKeyLimits())
    for seconds in (0, 10, 30):
        state = after_congestion(state, NOW + timedelta(seconds=seconds), timedelta(1), 1)
    state = after_congestion(state, NOW + timedelta(seconds=30), None, 1)  # a 503: not a 429
    assert spent(trimmed(state.rate_limited, NOW + timedelta(seconds=30))) == 3
    assert spent(trimmed(state.rate_limited, NOW + timedelta(seconds=71))) == 1


def test_only_what_is_leased_is_spent() -> None:
    state = KeyState(ModelKeyLimits(requests_per_minute=10))
    admitted, used = admit(_jobs(A, 8), {A: state}, {}, NOW, wanted=3)
    assert len(admitted) == 3
    assert spent(used[A].requests) == 3


def test_a_key_without_minute_limits_keeps_no_counts_and_needs_no_write() -> None:
    """A concurrency window alone (slow start) reads no per-second counts: a claim on it changes
    nothing to save, so a round writes no key row."""
    state = KeyState(ModelKeyLimits(), effective=8.0)
    admitted, changed = admit(_jobs(A, 5), {A: state}, {}, NOW)
    assert len(admitted) == 5
    assert changed == {}
    limited = KeyState(ModelKeyLimits(requests_per_minute=100))
    _, changed = admit(_jobs(A, 5), {A: limited}, {}, NOW)
    assert spent(changed[A].requests) == 5
    assert changed[A].tokens == ()  # no token limit: no token counts either


def test_only_a_limit_a_window_or_a_pause_restricts_a_key() -> None:
    """What decides whether a claim locks the key rows: a key nothing restricts is admitted on a
    plain read."""
    assert not restricts(KeyState(ModelKeyLimits()), NOW)
    assert not restricts(KeyState(ModelKeyLimits(), paused_until=NOW), NOW)  # the pause is over
    assert restricts(KeyState(ModelKeyLimits(), paused_until=AFTER), NOW)
    assert restricts(KeyState(ModelKeyLimits(), effective=200.0), NOW)
    for limits in (
        ModelKeyLimits(max_concurrency=1),
        ModelKeyLimits(requests_per_minute=1),
        ModelKeyLimits(tokens_per_minute=1),
        ModelKeyLimits(daily_cost_micros=1),
    ):
        assert restricts(KeyState(limits), NOW)


def test_a_claim_locks_a_key_it_may_refuse_or_will_write() -> None:
    """Counts left from a per-minute limit since removed: the claim clears them (a write), so it
    reads them under the lock; an unlimited key without counts is admitted on a plain read."""
    assert not claim_locks(KeyState(ModelKeyLimits()), NOW)
    assert claim_locks(KeyState(ModelKeyLimits(max_concurrency=2)), NOW)
    leftover = KeyState(ModelKeyLimits(), requests=((int(NOW.timestamp()), 3),))
    assert not restricts(leftover, NOW) and claim_locks(leftover, NOW)
    _, changed = admit(_jobs(A, 1), {A: leftover}, {}, NOW)
    assert changed[A].requests == ()  # the write the lock is for


def test_a_first_token_late_by_a_few_milliseconds_is_jitter_not_a_queue() -> None:
    """A local model answers its first token in milliseconds: seven times a 4 ms baseline is
    still the host's jitter; later than the baseline by more than the slack is a queue."""
    state = _with_baseline(KeyState(ModelKeyLimits(), effective=16.0), 4)
    jitter = after_answers(state, [Answered(NOW, 30)], NOW, tolerance=1.5)
    assert jitter.decreased_at is None and jitter.concurrency() == 18  # grown, as any success
    queued = after_answers(state, [Answered(NOW, 4 + LATENCY_SLACK_MS + 1)], NOW, tolerance=1.5)
    assert queued.concurrency() == 8

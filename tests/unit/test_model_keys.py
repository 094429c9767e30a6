"""Model-key budgets (scheduler_service/flow/keys.py): pauses, AIMD concurrency, buckets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_service.flow.keys import (
    KeyState,
    Limits,
    ModelKey,
    admit,
    after_congestion,
    after_successes,
    spent,
    trimmed,
)

NOW = datetime(2026, 12, 1, tzinfo=UTC)
A = ModelKey("deepseek", "deepseek-chat", "platform")
B = ModelKey("deepseek", "deepseek-reasoner", "platform")


def _jobs(key: ModelKey, count: int, tokens: int = 100) -> list[tuple[str, ModelKey, int]]:
    return [(f"{key.model}-{n}", key, tokens) for n in range(count)]


def test_a_paused_key_leases_nothing_and_others_go_on() -> None:
    paused = KeyState(Limits(), paused_until=NOW + timedelta(seconds=3))
    admitted, _ = admit(_jobs(A, 3) + _jobs(B, 2), {A: paused}, {}, NOW)
    assert admitted == ["deepseek-reasoner-0", "deepseek-reasoner-1"]
    admitted, _ = admit(_jobs(A, 3), {A: paused}, {}, NOW + timedelta(seconds=3, microseconds=1))
    assert len(admitted) == 3


def test_concurrency_counts_what_runs() -> None:
    state = KeyState(Limits(max_concurrency=4))
    admitted, _ = admit(_jobs(A, 10), {A: state}, {A: 3}, NOW)
    assert len(admitted) == 1


def test_a_429_halves_the_concurrency_and_successes_bring_it_back() -> None:
    state = KeyState(Limits(max_concurrency=8))
    congested = after_congestion(state, NOW, timedelta(seconds=3), running=8)
    assert congested.concurrency() == 4
    assert congested.paused_until == NOW + timedelta(seconds=3)
    recovered = after_successes(congested, 40)
    assert recovered.concurrency() == 8 and recovered.effective is None


def test_a_503_lowers_without_pausing() -> None:
    congested = after_congestion(KeyState(Limits()), NOW, None, running=6)
    assert (congested.concurrency(), congested.paused_until) == (3, None)


@settings(max_examples=50, deadline=None)
@given(
    st.integers(min_value=6, max_value=600),
    st.lists(st.floats(min_value=0, max_value=5), min_size=1, max_size=120),
)
def test_no_sliding_minute_sees_more_requests_than_the_limit(rpm: int, gaps: list[float]) -> None:
    """Claim as much as the bucket allows at each moment: the leases of any 60 s stay within
    requests_per_minute."""
    state = KeyState(Limits(requests_per_minute=rpm))
    now, starts = NOW, []
    for gap in gaps:
        now += timedelta(seconds=gap)
        admitted, spent = admit(_jobs(A, rpm), {A: state}, {}, now)
        state = spent[A]
        starts += [now] * len(admitted)
    for index, start in enumerate(starts):
        window = [s for s in starts[index:] if s < start + timedelta(seconds=60)]
        assert len(window) <= rpm


def test_tokens_per_minute_bound_large_jobs() -> None:
    state = KeyState(Limits(tokens_per_minute=1_000))
    admitted, spent = admit(_jobs(A, 5, tokens=400), {A: state}, {}, NOW)
    assert len(admitted) == 2
    assert admit(_jobs(A, 5, tokens=400), spent, {}, NOW + timedelta(seconds=60))[0] == []
    later, _ = admit(_jobs(A, 5, tokens=400), spent, {}, NOW + timedelta(seconds=61))
    assert len(later) == 2  # the first minute's tokens left the window
    (alone,), _ = admit(_jobs(A, 2, tokens=5_000), {A: state}, {}, NOW)
    assert alone == "deepseek-chat-0"  # larger than the limit: runs, alone in its minute


def test_a_burst_the_provider_accepts_is_not_held_back() -> None:
    state = KeyState(Limits(requests_per_minute=600))
    admitted, _ = admit(_jobs(A, 300), {A: state}, {}, NOW)
    assert len(admitted) == 300


def test_429s_are_counted_per_last_minute() -> None:
    state = KeyState(Limits())
    for seconds in (0, 10, 30):
        state = after_congestion(state, NOW + timedelta(seconds=seconds), timedelta(1), 1)
    state = after_congestion(state, NOW + timedelta(seconds=30), None, 1)  # a 503: not a 429
    assert spent(trimmed(state.rate_limited, NOW + timedelta(seconds=30))) == 3
    assert spent(trimmed(state.rate_limited, NOW + timedelta(seconds=71))) == 1


def test_only_what_is_leased_is_spent() -> None:
    state = KeyState(Limits(requests_per_minute=10))
    admitted, used = admit(_jobs(A, 8), {A: state}, {}, NOW, wanted=3)
    assert len(admitted) == 3
    assert spent(used[A].requests) == 3

"""Fair places: users take turns within a priority (scheduler_service/core/fairness.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scheduler_service.core.fairness import Floor, RunningCaps, places

EMPTY = Floor(head=None, running=None)


def test_a_backlog_counts_up_and_a_newcomer_goes_first() -> None:
    backlog, _ = places([("a", 50)] * 200, {}, {50: EMPTY})
    assert backlog == list(range(200))
    (newcomer,), _ = places([("b", 50)], {}, {50: Floor(head=min(backlog), running=None)})
    assert newcomer < min(backlog)  # ahead of every waiting job


def test_two_users_then_alternate() -> None:
    # a has places 5..200 waiting; b's jobs interleave with them from the head on.
    placed, latest = places([("b", 50)] * 3, {"b": 0}, {50: Floor(head=5, running=4)})
    assert placed == [4, 5, 6]
    assert latest == {"b": 6}


def test_a_returning_user_starts_level_not_behind_their_history() -> None:
    (place,), _ = places([("a", 50)], {"a": 3}, {50: Floor(head=None, running=10_000)})
    assert place == 10_000
    (place,), _ = places([("heavy", 50)], {"heavy": 10_000}, {50: Floor(head=None, running=12)})
    assert place == 10_001  # still waits its turn behind others' queued work


@given(
    st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from([10, 50])), max_size=40),
    st.dictionaries(st.sampled_from("abc"), st.integers(0, 1_000)),
    st.integers(0, 1_000),
)
def test_places_grow_per_user_and_never_undercut_the_floor(
    jobs: list[tuple[str, int]], lasts: dict[str, int], head: int
) -> None:
    floors = {10: Floor(head=head, running=None), 50: EMPTY}
    placed, latest = places(jobs, lasts, floors)
    seen: dict[str, int] = dict(lasts)
    for (user, priority), place in zip(jobs, placed, strict=True):
        assert user not in seen or place > seen[user]
        assert place >= floors[priority].place
        seen[user] = place
    assert latest == {user: seen[user] for user, _ in jobs}


@given(
    st.lists(st.tuples(st.uuids().map(str), st.sampled_from("abcd")), unique_by=lambda p: p[0]),
    st.dictionaries(st.sampled_from("abcd"), st.integers(0, 4)),
    st.integers(0, 3),
    st.integers(0, 30),
)
def test_running_caps_admit_in_order_and_never_past_a_cap(
    candidates: list[tuple[str, str]], running: dict[str, int], default: int, wanted: int
) -> None:
    caps = RunningCaps(default=default, overrides={"d": 1})
    admitted = caps.admit(candidates, running, wanted)
    assert len(admitted) <= wanted
    order = [job_id for job_id, _ in candidates]
    assert admitted == sorted(admitted, key=order.index)
    users = dict(candidates)
    for user in "abcd":
        cap = caps.of(user)
        total = running.get(user, 0) + sum(users[j] == user for j in admitted)
        if cap > 0:
            assert total <= max(cap, running.get(user, 0))
    # Nothing admissible was skipped before the last admitted candidate.
    if len(admitted) < wanted:
        for job_id, user in candidates:
            if job_id not in admitted:
                cap = caps.of(user)
                taken = running.get(user, 0) + sum(users[j] == user for j in admitted)
                assert cap > 0 and taken >= cap


def test_no_caps_are_inactive() -> None:
    assert not RunningCaps().active
    assert RunningCaps(overrides={"x": 2}).active

"""The one policy of a failing background loop: it backs off from its interval up to
the cap, writes its first failure with a traceback and then at most one line per log interval
with a count, and says once that it recovered."""

from __future__ import annotations

import logging

import pytest

from scheduler_service.services.loops import MAX_ERROR_BACKOFF_S, FailureStreak


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_waits_double_up_to_the_cap_and_come_back_after_a_success() -> None:
    streak = FailureStreak("outbox", 0.1, clock=Clock())
    waits = [streak.failed(RuntimeError("down")) for _ in range(8)]
    assert waits[:4] == pytest.approx([0.2, 0.4, 0.8, 1.6])
    assert max(waits) == MAX_ERROR_BACKOFF_S
    streak.succeeded()
    assert streak.failed(RuntimeError("down")) == pytest.approx(0.2)


def test_a_loop_slower_than_the_cap_keeps_its_own_interval() -> None:
    streak = FailureStreak("reaper", 5.0, clock=Clock())
    assert {streak.failed(RuntimeError("down")) for _ in range(5)} == {5.0}


def test_one_line_per_log_interval_with_the_count(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    streak = FailureStreak("dispatcher", 0.25, log_every_s=10, clock=clock)
    caplog.set_level(logging.INFO, logger="scheduler_service.services.loops")
    for _ in range(100):  # 25 s of rounds failing every 0.25 s
        streak.failed(RuntimeError("no such table"))
        clock.now += 0.25
    lines = [r for r in caplog.records if "round failed" in r.getMessage()]
    assert len(lines) == 3  # at 0 s, 10 s and 20 s
    assert lines[0].exc_info is not None and all(r.exc_info is None for r in lines[1:])
    assert [r.__dict__["sinceLastLine"] for r in lines] == [1, 40, 40]
    streak.succeeded()
    assert caplog.records[-1].getMessage() == "dispatcher recovered after 100 failed rounds"


def test_a_flapping_loop_still_writes_one_line_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    streak = FailureStreak("outbox", 0.2, log_every_s=10, clock=clock)
    caplog.set_level(logging.INFO, logger="scheduler_service.services.loops")
    for _ in range(50):  # 10 s of a loop failing and succeeding in turn, a round every 0.2 s
        streak.failed(RuntimeError("lost connection"))
        streak.succeeded()
        clock.now += 0.2
    # One failure line and its recovery; the 49 streaks after them are counted, not written.
    assert [r.getMessage() for r in caplog.records] == [
        "outbox round failed (1 since the last line): RuntimeError",
        "outbox recovered after 1 failed rounds",
    ]

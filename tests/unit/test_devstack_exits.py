"""`make run` keeps serving when one runtime finishes cleanly (issue 15), and stops when the
scheduler ends or a runtime fails."""

from __future__ import annotations

from devtools.devstack import after_exits

RUNNING = ["scheduler", "runtime-1", "runtime-2"]


def test_a_runtime_that_finishes_cleanly_leaves_the_others_serving() -> None:
    assert after_exits(RUNNING, {"runtime-1": 0}) is None


def test_the_last_runtime_finishing_ends_the_stack_cleanly() -> None:
    assert after_exits(["scheduler", "runtime-2"], {"runtime-2": 0}) == 0


def test_a_failing_runtime_or_the_scheduler_ending_stops_everything() -> None:
    assert after_exits(RUNNING, {"runtime-2": 1}) == 1
    assert after_exits(RUNNING, {"scheduler": 0}) == 1
    assert after_exits(RUNNING, {"runtime-1": 0, "scheduler": -15}) == 1

"""`make run` keeps serving when one runtime finishes cleanly, and stops when the
scheduler ends or a runtime fails."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from devtools.devstack import after_exits, already_serving, main

RUNNING = ["scheduler", "runtime-1", "runtime-2"]


def test_a_runtime_that_finishes_cleanly_leaves_the_others_serving() -> None:
    assert after_exits(RUNNING, {"runtime-1": 0}) is None


def test_the_last_runtime_finishing_ends_the_stack_cleanly() -> None:
    assert after_exits(["scheduler", "runtime-2"], {"runtime-2": 0}) == 0


def test_a_failing_runtime_or_the_scheduler_ending_stops_everything() -> None:
    assert after_exits(RUNNING, {"runtime-2": 1}) == 1
    assert after_exits(RUNNING, {"scheduler": 0}) == 1
    assert after_exits(RUNNING, {"runtime-1": 0, "scheduler": -15}) == 1


def test_a_second_make_run_names_the_stack_already_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """It says which stack serves the address, instead of failing to bind, waiting on the first
    stack's health, starting runtimes and reporting "Address already in use" on its metrics port."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        monkeypatch.setenv("AIJOB_LISTEN", address)
        monkeypatch.chdir(tmp_path)
        assert already_serving(address)
        assert main(["run"]) == 1
    assert f"a stack already serves {address}" in capsys.readouterr().err
    assert not (tmp_path / ".aijob" / "logs").exists()  # nothing was started

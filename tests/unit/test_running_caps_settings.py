"""AIJOB_MAX_RUNNING_PER_USER and its per-user overrides, as read from the environment."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from scheduler_service.core.fairness import RunningCaps
from scheduler_service.wiring.settings import SchedulerSettings


def test_overrides_are_user_equals_count_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIJOB_MAX_RUNNING_PER_USER", "10")
    monkeypatch.setenv("AIJOB_MAX_RUNNING_PER_USER_OVERRIDES", "nightly-batch=5, vip=0")
    caps = SchedulerSettings().running_caps
    assert caps == RunningCaps(10, {"nightly-batch": 5, "vip": 0})
    assert (caps.of("nightly-batch"), caps.of("vip"), caps.of("anyone")) == (5, 0, 10)


@pytest.mark.parametrize("bad", ["nightly-batch", "=5", "user=five", "user=-1"])
def test_a_malformed_override_is_refused(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv("AIJOB_MAX_RUNNING_PER_USER_OVERRIDES", bad)
    with pytest.raises(ValidationError):
        SchedulerSettings()


def test_no_cap_by_default() -> None:
    assert not SchedulerSettings().running_caps.active

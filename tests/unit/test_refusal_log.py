"""Refused calls are all counted but logged at most once per interval per code (a flood
of bad calls wrote 9.5 MB of log in ten seconds)."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import REGISTRY

from scheduler_service.api.auth import RefusalLog


def _refused(code: str) -> float:
    return REGISTRY.get_sample_value("aijob_refused_calls_total", {"code": code}) or 0.0


def test_a_flood_of_refusals_is_counted_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="scheduler_service.api.auth")
    before = _refused("UNAUTHENTICATED")
    refusals = RefusalLog(interval_s=3_600)
    for _ in range(4_000):
        refusals.refused("UNAUTHENTICATED", "/aijob.v1.JobService/GetJob")
    refusals.refused("PERMISSION_DENIED", "/aijob.v1.AdminService/ListJobs")
    assert _refused("UNAUTHENTICATED") - before == 4_000
    lines = [r for r in caplog.records if r.getMessage() == "call refused"]
    assert [getattr(r, "code", None) for r in lines] == ["UNAUTHENTICATED", "PERMISSION_DENIED"]


def test_the_next_line_says_how_many_calls_it_stands_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="scheduler_service.api.auth")
    refusals = RefusalLog(interval_s=0)  # every call may log: the count of those between is 0
    refusals.refused("UNAUTHENTICATED", "/m")
    refusals.refused("UNAUTHENTICATED", "/m")
    now = [0.0]
    suppressing = RefusalLog(interval_s=10, clock=lambda: now[0])
    for _ in range(5):
        suppressing.refused("UNAUTHENTICATED", "/m")
    now[0] = 11.0  # the interval has passed
    suppressing.refused("UNAUTHENTICATED", "/m")
    counts = [getattr(r, "alsoRefused", None) for r in caplog.records]
    assert counts == [0, 0, 0, 4]

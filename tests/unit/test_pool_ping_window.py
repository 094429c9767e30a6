"""Which pooled connections are pinged before use (scheduler_service/sql/db/engine.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_service.sql.db.engine import needs_ping

seconds = st.floats(min_value=0, max_value=1e6, allow_nan=False)


def test_a_connection_never_known_alive_is_pinged() -> None:
    assert needs_ping(None, 10.0, 0.5)


def test_the_window_decides() -> None:
    assert not needs_ping(10.0, 10.4, 0.5)
    assert needs_ping(10.0, 10.5, 0.5)
    assert needs_ping(10.0, 70.0, 0.5)


# No deadline: a busy machine's pause is not a failure of the decision.
@settings(deadline=None)
@given(alive_at=seconds, idle=seconds)
def test_a_window_of_zero_pings_every_checkout(alive_at: float, idle: float) -> None:
    assert needs_ping(alive_at, alive_at + idle, 0.0)

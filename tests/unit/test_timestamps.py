"""Database times become protobuf Timestamps exactly as ``Timestamp.FromDatetime`` makes them
(scheduler_service/api/convert.py computes them itself, for speed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from google.protobuf import timestamp_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_service.api.convert import timestamp


def _reference(value: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value.replace(tzinfo=UTC) if value.tzinfo is None else value)
    return stamp


@settings(deadline=None)
@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)))
def test_naive_utc_times_match_from_datetime(value: datetime) -> None:
    assert timestamp(value) == _reference(value)


@settings(deadline=None)
@given(
    st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31)),
    st.integers(min_value=-14 * 60, max_value=14 * 60),
)
def test_aware_times_match_from_datetime(value: datetime, offset_minutes: int) -> None:
    aware = value.replace(tzinfo=timezone(timedelta(minutes=offset_minutes)))
    assert timestamp(aware) == _reference(aware)


def test_none_stays_unset() -> None:
    assert timestamp(None) is None

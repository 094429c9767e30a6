"""The per-job conversions that take the short way: rows into records with their columns named
once, and a lease's JSON objects into Structs without json_format."""

from __future__ import annotations

import random
from typing import Any

from google.protobuf import json_format, struct_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_service.api.convert import struct
from scheduler_service.core.records import RECORD_FIELDS, JobRecord
from scheduler_service.core.state_machine import LifecycleStatus


def _row(seed: int) -> dict[str, Any]:
    values: dict[str, Any] = {name: f"{name}-{seed}" for name in RECORD_FIELDS}
    values["lifecycleStatus"] = "running"
    return values


def test_records_from_rows_match_records_from_mappings_whatever_the_column_order() -> None:
    rows = [_row(seed) for seed in range(3)]
    # A result's columns: the record's in another order, and one the record does not keep.
    columns = [*RECORD_FIELDS, "dbNow"]
    random.Random(7).shuffle(columns)
    tuples = [tuple({**row, "dbNow": "now"}[column] for column in columns) for row in rows]

    records = list(JobRecord.from_rows(columns, tuples))

    assert records == [JobRecord.from_mapping(row) for row in rows]
    assert all(record.lifecycleStatus is LifecycleStatus.RUNNING for record in records)


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=12,
)


# No deadline: a busy machine's pause is not a failure of the conversion.
@settings(deadline=None)
@given(st.dictionaries(st.text(max_size=5), _JSON, max_size=4))
def test_a_leases_struct_is_the_one_json_format_would_build(value: dict[str, Any]) -> None:
    expected = struct_pb2.Struct()
    json_format.ParseDict(value, expected)
    assert struct(value) == expected

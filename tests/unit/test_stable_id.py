"""Artifact and business-row ids: the spelled-out uuid5 is the standard library's, bit for bit
(rows written before and after it was spelled out must keep their ids, or a retried result would
project a second copy)."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_service.sql.projection.base import _NAMESPACE, stable_id

PART = st.one_of(st.text(), st.integers(), st.none())


@settings(deadline=None)
@given(st.lists(PART, min_size=1, max_size=5))
def test_stable_id_is_uuid5_of_the_joined_parts(parts: list[object]) -> None:
    expected = str(uuid.uuid5(_NAMESPACE, ":".join(map(str, parts))))
    assert stable_id(*parts) == expected


def test_a_known_id_stays_what_it_was() -> None:
    assert stable_id("job-1", "artifact", "SyntheticEcho", 0) == str(
        uuid.uuid5(_NAMESPACE, "job-1:artifact:SyntheticEcho:0")
    )

"""An attempt's stored text is one run within its bounds, and a lease that carries it back stays
deliverable. Pure."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler_service.api import convert
from scheduler_service.core import validation
from scheduler_service.core.errors import InvalidRequestError, LimitExceededError
from scheduler_service.core.output_records import Stored
from scheduler_service.core.output_tally import (
    RESUME_BYTES,
    ChunkTally,
    new_part,
    partial_output_bytes,
)
from scheduler_service.core.records import LeasePayload

BOUNDS = (100, 10)


def test_a_chunk_joins_at_the_end_adds_only_its_new_tail_and_never_leaves_a_gap() -> None:
    stored = Stored().with_part("abc")
    assert new_part(stored, 3, "def", BOUNDS) == "def"
    assert new_part(stored, 1, "bcde", BOUNDS) == "de"
    assert new_part(stored, 0, "ab", BOUNDS) == ""
    with pytest.raises(InvalidRequestError, match="would leave a gap"):
        new_part(stored, 4, "e", BOUNDS)


def test_bytes_and_rows_past_the_bounds_are_refused() -> None:
    with pytest.raises(LimitExceededError, match=r"\(100 bytes\)"):
        new_part(Stored(end=40, size=99, rows=1), 40, "é", BOUNDS)
    with pytest.raises(LimitExceededError, match="as many output chunks"):
        new_part(Stored(end=10, size=10, rows=10), 10, "x", BOUNDS)
    # Text already stored is no new row.
    assert new_part(Stored(end=10, size=10, rows=10), 5, "x", BOUNDS) == ""


def test_the_bound_never_exceeds_what_a_lease_carries_back() -> None:
    assert partial_output_bytes(1024) == 1024
    assert partial_output_bytes(64 * 1024 * 1024) == RESUME_BYTES


def test_a_tally_reads_again_for_a_chunk_past_what_it_knows() -> None:
    tally = ChunkTally(most_bytes=100, most_rows=10)
    first, other = ("job-1", 1), ("job-2", 1)
    assert tally.unknown([(first, 0), (other, 5)]) == {other}
    tally.stored(first, Stored(end=3, size=3, rows=1))
    assert tally.unknown([(first, 3)]) == set()
    # Another replica stored more: a chunk past the known end reads the attempt again.
    assert tally.unknown([(first, 7)]) == {first}
    tally.known({first: Stored(end=7, size=7, rows=2)})
    assert tally.of(first) == Stored(end=7, size=7, rows=2)


def _payload(resume: str) -> LeasePayload:
    return LeasePayload(
        "job-1",
        "quiz_generation",
        2,
        datetime(2026, 1, 1),
        60_000,
        {"text": "x" * 600_000},
        {},
        "quiz_generation",
        "v1",
        "model",
        "platform",
        "",
        "v1",
        resume_output=resume,
        stream_output=True,
    )


@given(st.text(min_size=1, max_size=40).map(lambda s: s * 30_000))
def test_a_lease_never_exceeds_its_bytes_and_its_resume_text_stays_a_prefix(text: str) -> None:
    limit = 1024 * 1024
    message = convert.lease(_payload(text), max_bytes=limit)
    if len(text.encode()) < limit // 3:
        assert message.resume_output == text
    assert message.ByteSize() <= limit
    assert text.startswith(message.resume_output)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=300),
    lambda children: (
        st.lists(children, max_size=8) | st.dictionaries(st.text(max_size=20), children, max_size=8)
    ),
    max_leaves=60,
)


@given(st.dictionaries(st.text(max_size=20), JSON, max_size=8))
def test_the_struct_size_estimate_is_never_below_the_encoded_size(value: dict[str, object]) -> None:
    # The size is checked against a bound of its own: estimate it through that bound's message.
    encoded = convert.struct(value).ByteSize()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(validation, "MAX_LEASE_INPUT_BYTES", encoded - 1)
        assert validation.lease_problem(value) is not None

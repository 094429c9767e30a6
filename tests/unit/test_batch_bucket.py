"""Multi-row writes are compiled for a few row counts only (powers of two), padded up to them."""

from hypothesis import given
from hypothesis import strategies as st

from scheduler_service.sql.db.multirow import batch_bucket


@given(st.integers(min_value=1, max_value=100_000))
def test_a_bucket_holds_the_rows_and_at_most_doubles_them(rows: int) -> None:
    bucket = batch_bucket(rows)
    assert rows <= bucket < 2 * rows or bucket == rows == 1
    assert bucket & (bucket - 1) == 0


def test_small_counts() -> None:
    assert [batch_bucket(n) for n in (1, 2, 3, 4, 5, 8, 9)] == [1, 2, 4, 4, 8, 8, 16]

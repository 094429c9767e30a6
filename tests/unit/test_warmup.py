"""Which new jobs wait for a shared prompt prefix to warm (core/warmup.py): the first of each
(user, prefix) goes, the rest wait; all wait when a job of theirs is warming already; a short
snapshot, an explicit IMMEDIATE or a layout that does not start with the snapshot never waits."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scheduler_service.core.records import NewJob
from scheduler_service.core.warmup import WarmupPolicy, followers, prefix_key

POLICY = WarmupPolicy(wait_s=2.0, min_snapshot_bytes=10)


def _job(index: int, user: str, key: str | None) -> NewJob:
    return NewJob(
        job_id=f"job-{index}",
        user_id=user,
        job_type="t",
        queue_name="q",
        priority=50,
        max_attempts=3,
        timeout_ms=1_000,
        prefix_key=key,
    )


def test_a_prefix_key_only_for_a_long_snapshot_first_layout_not_asked_immediate() -> None:
    long = b'{"snapshot":"long enough"}'
    assert prefix_key(POLICY, "v2", long, explicit_immediate=False) is not None
    assert prefix_key(POLICY, "v2", b"{}", explicit_immediate=False) is None
    assert prefix_key(POLICY, "v1", long, explicit_immediate=False) is None
    assert prefix_key(POLICY, "v2", long, explicit_immediate=True) is None
    off = WarmupPolicy(wait_s=0, min_snapshot_bytes=10)
    assert prefix_key(off, "v2", long, explicit_immediate=False) is None
    # The same bytes, the same key: what jobs over one snapshot share.
    assert prefix_key(POLICY, "v2", long, explicit_immediate=False) == prefix_key(
        POLICY, "v2", long, explicit_immediate=False
    )


@given(
    st.lists(
        st.tuples(st.sampled_from(["u1", "u2"]), st.sampled_from(["a", "b", None])),
        max_size=12,
    ),
    st.sets(st.tuples(st.sampled_from(["u1", "u2"]), st.sampled_from(["a", "b"]))),
)
def test_one_leader_per_group_unless_one_is_warming(
    specs: list[tuple[str, str | None]], warming: set[tuple[str, str]]
) -> None:
    jobs = [_job(i, user, key) for i, (user, key) in enumerate(specs)]
    waiting = set(followers(jobs, warming))
    for group in {(j.user_id, j.prefix_key) for j in jobs if j.prefix_key is not None}:
        members = [j.job_id for j in jobs if (j.user_id, j.prefix_key) == group]
        going = [m for m in members if m not in waiting]
        assert going == ([] if group in warming else members[:1])
    assert not {j.job_id for j in jobs if j.prefix_key is None} & waiting


def test_nothing_waits_for_a_prefix_already_warm() -> None:
    jobs = [_job(i, "u1", "a") for i in range(3)]
    assert followers(jobs, warming=set(), warm={("u1", "a")}) == []
    assert followers(jobs, warming={("u1", "a")}, warm={("u1", "a")}) == []

"""The pure state machine: every legal transition, every illegal one, and random sequences."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler_service.core.errors import (
    IllegalTransitionError,
    JobAlreadyTerminalError,
    JobLockConflictError,
    JobNotActiveError,
    JobNotCancellableError,
    LifecycleError,
)
from scheduler_service.core.state_machine import (
    LEGACY_STATUS_OF,
    LIFECYCLE_OF_LEGACY,
    TERMINAL,
    TRANSITIONS,
    LifecycleStatus,
    Operation,
    can_transition,
    check,
    legacy_status_of,
    lifecycle_of_legacy,
    parse_status,
    sources_of,
)
from scheduler_service.core.transitions import renew_within_ms

S = LifecycleStatus

EXPECTED_TRANSITIONS = {
    (S.QUEUED, S.RUNNING),
    (S.QUEUED, S.CANCELLED),
    (S.QUEUED, S.FAILED),
    (S.RUNNING, S.SUCCEEDED),
    (S.RUNNING, S.FAILED),
    (S.RUNNING, S.QUEUED),
    (S.RUNNING, S.CANCELLED),
    # Job trees: a parent takes children and waits; its children's ends join it.
    (S.QUEUED, S.WAITING),
    (S.WAITING, S.WAITING),
    (S.WAITING, S.SUCCEEDED),
    (S.WAITING, S.FAILED),
    (S.WAITING, S.QUEUED),
    (S.WAITING, S.CANCELLED),
}


def test_transition_table_is_the_designs() -> None:
    assert {(t.source, t.target) for t in TRANSITIONS} == EXPECTED_TRANSITIONS
    assert {S.SUCCEEDED, S.FAILED, S.CANCELLED} == TERMINAL


@pytest.mark.parametrize("transition", TRANSITIONS, ids=lambda t: f"{t.source}-{t.operation}")
def test_every_legal_transition_is_accepted(transition: object) -> None:
    from scheduler_service.core.state_machine import Transition

    assert isinstance(transition, Transition)
    assert check("j", transition.source, transition.operation) is transition.target
    assert can_transition(transition.source, transition.target)


ILLEGAL = [
    (status, op)
    for status, op in itertools.product(LifecycleStatus, Operation)
    if status not in sources_of(op)
]


@pytest.mark.parametrize(("status", "operation"), ILLEGAL, ids=str)
def test_every_illegal_transition_is_rejected_with_a_typed_error(
    status: LifecycleStatus, operation: Operation
) -> None:
    with pytest.raises(LifecycleError) as caught:
        check("job-1", status, operation)
    err = caught.value
    assert err.job_id == "job-1"
    assert err.current == status
    if operation is Operation.CANCEL:
        assert isinstance(err, JobNotCancellableError)
    elif status in TERMINAL:
        assert isinstance(err, JobAlreadyTerminalError)
    elif operation is Operation.LOCK:
        assert isinstance(err, JobLockConflictError)
    elif sources_of(operation) == {S.RUNNING}:
        assert isinstance(err, JobNotActiveError)
    else:
        assert isinstance(err, IllegalTransitionError)


def test_illegal_pairs_not_in_table() -> None:
    for source, target in itertools.product(LifecycleStatus, LifecycleStatus):
        assert can_transition(source, target) == ((source, target) in EXPECTED_TRANSITIONS)


@pytest.mark.parametrize("status", sorted(TERMINAL))
def test_terminal_states_have_no_way_out(status: LifecycleStatus) -> None:
    assert not any(t.source is status for t in TRANSITIONS)
    for op in Operation:
        with pytest.raises(LifecycleError):
            check("j", status, op)


def test_legacy_status_maps_both_ways() -> None:
    assert LEGACY_STATUS_OF == {
        S.QUEUED: "pending",
        S.RUNNING: "processing",
        S.WAITING: "processing",
        S.SUCCEEDED: "completed",
        S.FAILED: "failed",
        S.CANCELLED: "failed",
    }
    assert LIFECYCLE_OF_LEGACY == {
        "pending": S.QUEUED,
        "processing": S.RUNNING,
        "completed": S.SUCCEEDED,
        "failed": S.FAILED,
        "cancelled": S.CANCELLED,
        "cancel_requested": S.CANCELLED,
    }
    # Every state except cancelled (legacy has none) and a waiting parent (legacy readers see it
    # as processing) round-trips through the legacy column.
    for status in LifecycleStatus:
        if status not in (S.CANCELLED, S.WAITING):
            assert lifecycle_of_legacy(legacy_status_of(status)) is status
    with pytest.raises(ValueError):
        lifecycle_of_legacy("expired")


def test_parse_status_rejects_unknown_values() -> None:
    assert parse_status("queued") is S.QUEUED
    for bad in ("locked", "pending", "", "QUEUED"):
        with pytest.raises(ValueError):
            parse_status(bad)


@given(st.lists(st.sampled_from(list(Operation)), max_size=40))
def test_random_sequences_follow_the_table(operations: list[Operation]) -> None:
    """Applying any sequence: accepted steps are table entries, rejected ones change nothing,
    and once terminal every further step is rejected."""
    status = S.QUEUED
    for op in operations:
        before = status
        try:
            status = check("j", status, op)
        except LifecycleError as err:
            assert status is before
            assert err.current == before
            assert before not in sources_of(op)
        else:
            assert (before, status) in EXPECTED_TRANSITIONS
            assert before not in TERMINAL


@given(st.integers(min_value=1_000, max_value=24 * 3_600_000))
def test_a_lease_left_for_being_fresh_survives_a_missed_keeper_round(ttl_ms: int) -> None:
    """The keeper runs every third of a TTL and renews leases with less than ``renew_within_ms``
    left: after a round every lease has at least that; a round later at least half a TTL; after
    a missed round still some, before any grace."""
    renew = renew_within_ms(ttl_ms)
    interval = ttl_ms / 3
    assert renew < ttl_ms  # a lease just granted is left alone
    assert renew - interval >= ttl_ms / 2 - 1
    assert renew - 2 * interval > 0

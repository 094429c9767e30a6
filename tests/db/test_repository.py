"""The SQL job store on SQLite and MariaDB: every lifecycle write, its guard, its typed errors."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.core.errors import (
    IllegalTransitionError,
    JobAlreadyTerminalError,
    JobLockConflictError,
    JobNotCancellableError,
    JobNotFoundError,
    LeaseLostError,
)
from scheduler_service.core.records import JobError
from scheduler_service.core.state_machine import LifecycleStatus, legacy_status_of
from scheduler_service.core.transitions import SUCCEED
from scheduler_service.ports import Transaction
from tests.support.db import create_job, db_now_value, raw_row, shift_times
from tests.support.store import StoreCalls

S = LifecycleStatus
ERR = JobError("MODEL_TIMEOUT", "The model did not answer in time.", "read timeout after 30s")
HASH = "a" * 64


async def assert_state(
    engine: AsyncEngine, job_id: str, status: LifecycleStatus
) -> dict[str, object]:
    row = await raw_row(engine, job_id)
    assert row["lifecycleStatus"] == status.value
    assert row["status"] == legacy_status_of(status)
    return row


async def test_create_writes_a_queued_job(repo: StoreCalls, engine: AsyncEngine) -> None:
    job_id = await create_job(repo, engine, target_type="material", target_id="m-1")
    row = await assert_state(engine, job_id, S.QUEUED)
    assert row["status"] == "pending"
    assert row["attemptCount"] == 0
    assert row["queuedAt"] is not None and row["availableAt"] is not None
    assert row["startedAt"] is None and row["finishedAt"] is None
    record = await repo.get(job_id)
    assert record is not None and record.lifecycleStatus is S.QUEUED


async def test_lock_leases_attempt_one(repo: StoreCalls, engine: AsyncEngine) -> None:
    job_id = await create_job(repo, engine)
    before = await db_now_value(engine)
    lease = await repo.lock(job_id, "rt-1")
    assert lease.attempt_no == 1
    assert timedelta(seconds=59) <= lease.lock_until - before <= timedelta(seconds=62)
    row = await assert_state(engine, job_id, S.RUNNING)
    assert row["lockedBy"] == "rt-1"
    assert row["startedAt"] is not None and row["lockedAt"] is not None


async def test_lock_conflict_and_missing_job(repo: StoreCalls, engine: AsyncEngine) -> None:
    job_id = await create_job(repo, engine)
    await repo.lock(job_id, "rt-1")
    with pytest.raises(JobLockConflictError) as caught:
        await repo.lock(job_id, "rt-2")
    assert caught.value.current == S.RUNNING
    with pytest.raises(JobNotFoundError):
        await repo.lock("no-such-job", "rt-1")
    assert (await raw_row(engine, job_id))["lockedBy"] == "rt-1"


async def test_lock_honours_available_at(repo: StoreCalls, engine: AsyncEngine) -> None:
    job_id = await create_job(repo, engine)
    await shift_times(engine, job_id, availableAt=+120)
    with pytest.raises(JobLockConflictError, match="waiting for a retry"):
        await repo.lock(job_id, "rt-1")
    await assert_state(engine, job_id, S.QUEUED)


async def test_heartbeat_extends_only_the_holders_lease(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    job_id = await create_job(repo, engine)
    lease = await repo.lock(job_id, "rt-1")
    await shift_times(engine, job_id, lockUntil=-50)
    beat = await repo.extend_lease(job_id, 1, "rt-1", progress=40)
    assert beat.lock_until >= lease.lock_until - timedelta(milliseconds=5)
    assert beat.cancel_requested is False
    row = await raw_row(engine, job_id)
    assert row["progress"] == 40
    assert row["lastHeartbeatAt"] is not None

    for attempt, instance in ((1, "rt-other"), (2, "rt-1")):
        with pytest.raises(LeaseLostError):
            await repo.extend_lease(job_id, attempt, instance)
    assert (await raw_row(engine, job_id))["lockUntil"] == row["lockUntil"]


async def test_two_heartbeats_in_one_tick_both_succeed(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    """Reliability S16: a write that changes nothing still counts as matched."""
    job_id = await create_job(repo, engine)
    await repo.lock(job_id, "rt-1")
    first = await repo.extend_lease(job_id, 1, "rt-1", progress=10)
    second = await repo.extend_lease(job_id, 1, "rt-1", progress=10)
    assert second.lock_until >= first.lock_until


async def test_keep_alive_renews_the_leases_due_and_leaves_fresh_ones(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    """TTL 60 s: a lease with 40 s left is due (less than five sixths of a TTL); one with more
    than a TTL left is not (moved an hour on, so that no stall of the host between the lock and
    the keep-alive can make it due), nor one of another holder; the due one gets a whole TTL
    again."""
    due, fresh, other = [await create_job(repo, engine) for _ in range(3)]
    for job_id, holder in ((due, "rt-1"), (fresh, "rt-1"), (other, "rt-2")):
        await repo.lock(job_id, holder)
    await shift_times(engine, due, lockUntil=-20)
    await shift_times(engine, fresh, lockUntil=3600)
    await shift_times(engine, other, lockUntil=-20)
    before = {job_id: (await raw_row(engine, job_id))["lockUntil"] for job_id in (fresh, other)}
    before_keep = await db_now_value(engine)
    assert await repo.keep_alive(["rt-1"]) == 1
    after_keep = await db_now_value(engine)
    renewed = (await raw_row(engine, due))["lockUntil"]
    ttl = timedelta(seconds=60)
    assert before_keep + ttl <= renewed <= after_keep + ttl
    for job_id, lock_until in before.items():
        assert (await raw_row(engine, job_id))["lockUntil"] == lock_until


async def test_lease_past_grace_is_lost(repo: StoreCalls, engine: AsyncEngine) -> None:
    job_id = await create_job(repo, engine)
    await repo.lock(job_id, "rt-1")
    await shift_times(engine, job_id, lockUntil=-91)  # 60 s lease, 30 s grace: 1 s past both
    expired = await repo.find_expired_leases()
    assert [(e.job_id, e.attempt_no) for e in expired] == [(job_id, 1)]
    with pytest.raises(LeaseLostError):
        await repo.extend_lease(job_id, 1, "rt-1")


async def test_requeue_for_retry_then_second_attempt(repo: StoreCalls, engine: AsyncEngine) -> None:
    job_id = await create_job(repo, engine)
    await repo.lock(job_id, "rt-1")
    now = await db_now_value(engine)
    available_at = await repo.requeue_for_retry(
        job_id, 1, ERR, delay_ms=5_000, runtime_instance_id="rt-1"
    )
    assert timedelta(seconds=4) <= available_at - now <= timedelta(seconds=7)
    row = await assert_state(engine, job_id, S.QUEUED)
    assert row["lockedBy"] is None and row["lockUntil"] is None
    assert row["errorCode"] == "MODEL_TIMEOUT"
    with pytest.raises(JobLockConflictError):
        await repo.lock(job_id, "rt-2")  # still backing off
    await shift_times(engine, job_id, availableAt=-10)
    lease = await repo.lock(job_id, "rt-2")
    assert lease.attempt_no == 2
    # The first attempt is fenced off everywhere.
    with pytest.raises(LeaseLostError):
        await repo.requeue_for_retry(job_id, 1, ERR, delay_ms=0)
    with pytest.raises(LeaseLostError):
        await repo.mark_succeeded(
            job_id, 1, output_hash=HASH, result_idempotency_key=f"{job_id}:1:{HASH}"
        )
    with pytest.raises(LeaseLostError):
        await repo.extend_lease(job_id, 1, "rt-1")


async def test_requeue_refused_when_no_attempt_left(repo: StoreCalls, engine: AsyncEngine) -> None:
    job_id = await create_job(repo, engine, max_attempts=1)
    await repo.lock(job_id, "rt-1")
    with pytest.raises(IllegalTransitionError, match="no attempts are left"):
        await repo.requeue_for_retry(job_id, 1, ERR, delay_ms=0)
    await assert_state(engine, job_id, S.RUNNING)


async def test_mark_succeeded_clears_errors_and_sets_finish(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    job_id = await create_job(repo, engine)
    await repo.lock(job_id, "rt-1")
    await repo.requeue_for_retry(job_id, 1, ERR, delay_ms=0)
    await repo.lock(job_id, "rt-1")
    key = f"{job_id}:2:{HASH}"
    await repo.mark_succeeded(
        job_id, 2, output_hash=HASH, result_idempotency_key=key, validated_output={"ok": [1, 2]}
    )
    row = await assert_state(engine, job_id, S.SUCCEEDED)
    assert row["status"] == "completed"
    assert row["finishedAt"] is not None
    assert row["errorCode"] is None and row["internalErrorMessage"] is None
    assert row["publicErrorMessage"] is None
    assert (row["resultIdempotencyKey"], row["validatedOutput"], row["progress"]) == (
        key,
        {"ok": [1, 2]},
        100,
    )
    with pytest.raises(JobAlreadyTerminalError):
        await repo.mark_failed(job_id, 2, ERR)


async def test_mark_failed_keeps_error_fields(repo: StoreCalls, engine: AsyncEngine) -> None:
    job_id = await create_job(repo, engine)
    await repo.lock(job_id, "rt-1")
    await repo.mark_failed(job_id, 1, ERR, runtime_instance_id="rt-1")
    row = await assert_state(engine, job_id, S.FAILED)
    assert (row["errorCode"], row["publicErrorMessage"], row["internalErrorMessage"]) == (
        ERR.code,
        ERR.public_message,
        ERR.internal_message,
    )
    assert row["finishedAt"] is not None
    for write in (
        repo.mark_succeeded(job_id, 1, output_hash=HASH, result_idempotency_key="k"),
        repo.requeue_for_retry(job_id, 1, ERR, delay_ms=0),
    ):
        with pytest.raises(JobAlreadyTerminalError):
            await write
    with pytest.raises(JobNotCancellableError):
        await repo.mark_cancelled(job_id)


async def test_cancel_queued_job_at_once(repo: StoreCalls, engine: AsyncEngine) -> None:
    job_id = await create_job(repo, engine)
    assert await repo.request_cancellation(job_id, user_id="user-1") == "cancelled"
    row = await assert_state(engine, job_id, S.CANCELLED)
    assert (row["status"], row["errorCode"]) == ("failed", "CANCELLED")
    assert row["finishedAt"] is not None
    with pytest.raises(JobNotCancellableError):
        await repo.request_cancellation(job_id)
    with pytest.raises(JobAlreadyTerminalError):
        await repo.lock(job_id, "rt-1")


async def test_cancel_running_job_is_requested_then_confirmed(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    job_id = await create_job(repo, engine)
    await repo.lock(job_id, "rt-1")
    with pytest.raises(IllegalTransitionError, match="no cancel was requested"):
        await repo.mark_cancelled(job_id, attempt_no=1)
    assert await repo.request_cancellation(job_id) == "cancel_requested"
    assert await repo.request_cancellation(job_id) == "cancel_requested"
    row = await assert_state(engine, job_id, S.RUNNING)  # legacy status left alone until cancelled
    assert row["status"] == "processing" and row["cancelRequestedAt"] is not None
    assert (await repo.extend_lease(job_id, 1, "rt-1")).cancel_requested is True
    with pytest.raises(IllegalTransitionError, match="cancel was requested"):
        await repo.requeue_for_retry(job_id, 1, ERR, delay_ms=0)
    await repo.mark_cancelled(job_id, attempt_no=1)
    await assert_state(engine, job_id, S.CANCELLED)


async def test_cancel_of_another_users_job_is_not_found(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    job_id = await create_job(repo, engine, user_id="owner")
    with pytest.raises(JobNotFoundError):
        await repo.request_cancellation(job_id, user_id="intruder")
    with pytest.raises(JobNotFoundError):
        await repo.request_cancellation("missing", user_id="owner")
    await assert_state(engine, job_id, S.QUEUED)


async def test_expire_queued_after_deadline(repo: StoreCalls, engine: AsyncEngine) -> None:
    now = await db_now_value(engine)
    job_id = await create_job(repo, engine, deadline_at=now + timedelta(seconds=30))
    with pytest.raises(IllegalTransitionError, match="deadline not passed"):
        await repo.expire_queued(job_id)
    await shift_times(engine, job_id, deadlineAt=-60)
    with pytest.raises(JobLockConflictError, match="deadline"):
        await repo.lock(job_id, "rt-1")
    await repo.expire_queued(job_id)
    row = await assert_state(engine, job_id, S.FAILED)
    assert row["errorCode"] == "JOB_EXPIRED"


async def test_caller_transaction_rolls_back_with_the_lifecycle_write(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    job_id = await create_job(repo, engine)
    await repo.lock(job_id, "rt-1")

    class Boom(Exception):
        pass

    async def succeed_then_fail(tx: Transaction) -> None:
        await tx.jobs.apply(
            SUCCEED,
            job_id,
            attempt=1,
            outputHash=HASH,
            resultIdempotencyKey="k",
            validatedOutput=None,
        )
        assert (await tx.reads.get(job_id)) is not None
        raise Boom

    with pytest.raises(Boom):
        await repo.uow.run(succeed_then_fail)
    await assert_state(engine, job_id, S.RUNNING)


async def test_find_by_status(repo: StoreCalls, engine: AsyncEngine) -> None:
    queued = await create_job(repo, engine, queue_name="ai-background")
    running = await create_job(repo, engine, queue_name="ai-background")
    await repo.lock(running, "rt-1")
    found = await repo.find_by_status([S.QUEUED], queue_name="ai-background")
    assert [j.id for j in found] == [queued]
    both = await repo.find_by_status([S.QUEUED, S.RUNNING])
    assert {j.id for j in both} == {queued, running}

"""RuntimePieces and the reaper over the in-memory unit of work: leases, heartbeats, results,
failures and expiry, with the fences that keep a stale runtime out."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta

import pytest

from scheduler_service.core.errors import (
    InvalidRequestError,
    JobLockConflictError,
    LeaseLostError,
    ResultAlreadyExistsError,
)
from scheduler_service.core.events import EventType
from scheduler_service.core.records import LeasePayload
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.services.jobs import JobService
from scheduler_service.services.reaper import Reaper
from scheduler_service.services.reports import (
    FailureReport,
    HeartbeatReport,
    ResultSubmission,
)
from scheduler_service.services.runtime_pieces import RuntimePieces
from shared.canonical_json import output_hash
from tests.services.conftest import WakeupLog
from tests.services.test_job_service import command
from tests.support.fake_uow import FakeUnitOfWork
from tests.support.outputs import QUIZ

S = LifecycleStatus
OUTPUT = {"echo": {"text": "hello"}}


def result(lease: LeasePayload, holder: str = "rt-1", output: object = OUTPUT) -> ResultSubmission:
    return ResultSubmission(
        lease.job_id,
        lease.attempt_no,
        holder,
        output_hash(output),
        json.dumps(output),
        None,
        lease.lease_token,
    )


def failure(lease: LeasePayload, *, retryable: bool = True, holder: str = "rt-1") -> FailureReport:
    return FailureReport(
        lease.job_id,
        lease.attempt_no,
        holder,
        "MODEL_TIMEOUT",
        retryable,
        "",
        "",
        0,
        None,
        lease.lease_token,
    )


def beat(lease: LeasePayload, holder: str, progress: int) -> HeartbeatReport:
    return HeartbeatReport(lease.job_id, lease.attempt_no, holder, progress, lease.lease_token)


async def _leased(jobs: JobService, protocol: RuntimePieces, holder: str = "rt-1") -> LeasePayload:
    job, _ = await jobs.create(command())
    (lease,) = await protocol.leasing.claim(holder, ["synthetic_echo"], 1)
    assert lease.job_id == job.id
    return lease


async def test_claims_deal_the_oldest_jobs_to_each_runtime_once(
    jobs: JobService, protocol: RuntimePieces, uow: FakeUnitOfWork
) -> None:
    created = []
    for _ in range(3):
        job, _ = await jobs.create(command())
        created.append(job.id)
        uow.clock.advance(1)
    shares = await uow.run(
        lambda tx: protocol.leasing.claim_within(tx, ["synthetic_echo"], [("rt-a", 2), ("rt-b", 2)])
    )
    assert [[lease.job_id for lease in share] for share in shares] == [
        [created[0], created[2]],
        [created[1]],
    ]
    assert await protocol.leasing.claim("rt-c", ["synthetic_echo"], 4) == []


async def test_a_result_ends_the_job_once_and_a_repeat_is_a_duplicate(
    jobs: JobService, protocol: RuntimePieces, uow: FakeUnitOfWork, wakeups: WakeupLog
) -> None:
    lease = await _leased(jobs, protocol)
    wakeups.seen.clear()
    outcome = await protocol.reports.submit_result(result(lease))
    assert not outcome.duplicate
    assert outcome.result_idempotency_key == f"{lease.job_id}:1:{output_hash(OUTPUT)}"
    assert (await protocol.reports.submit_result(result(lease))).duplicate
    job = uow.state.jobs[lease.job_id]
    assert (job["lifecycleStatus"], job["progress"]) == ("succeeded", 100)
    assert [e.event_type for e in uow.state.events].count(EventType.COMPLETED) == 1
    assert uow.state.artifacts[lease.job_id]
    assert wakeups.seen == [
        "outbox:ai.job.completed",
        f"changed:{lease.job_id}",
        f"ended:{lease.job_id}",
    ]
    with pytest.raises(ResultAlreadyExistsError):
        await protocol.reports.submit_result(result(lease, output={"echo": "else"}))


async def test_a_result_with_a_wrong_hash_or_from_another_runtime_is_refused(
    jobs: JobService, protocol: RuntimePieces, uow: FakeUnitOfWork
) -> None:
    lease = await _leased(jobs, protocol)
    wrong = result(lease)
    with pytest.raises(InvalidRequestError) as caught:
        await protocol.reports.submit_result(
            ResultSubmission(wrong.job_id, 1, "rt-1", "0" * 64, wrong.output_json, None)
        )
    assert caught.value.field == "output_hash"
    with pytest.raises(LeaseLostError):
        await protocol.reports.submit_result(result(lease, holder="rt-2"))
    assert uow.state.jobs[lease.job_id]["lifecycleStatus"] == "running"
    assert [e.event_type for e in uow.state.events] == [EventType.ENQUEUE]


async def test_a_retryable_failure_requeues_until_attempts_run_out(
    jobs: JobService, protocol: RuntimePieces, uow: FakeUnitOfWork
) -> None:
    lease = await _leased(jobs, protocol)
    outcomes = []
    for attempt in (1, 2, 3):
        outcome = await protocol.reports.submit_failure(failure(lease))
        outcomes.append(outcome.status)
        if attempt < 3:
            uow.clock.advance(3_600)  # past any backoff
            (lease,) = await protocol.leasing.claim("rt-1", ["synthetic_echo"], 1)
            assert lease.attempt_no == attempt + 1
    assert outcomes == [S.QUEUED, S.QUEUED, S.FAILED]
    assert uow.state.jobs[lease.job_id]["errorCode"] == "MODEL_TIMEOUT"
    assert uow.state.events[-1].event_type is EventType.FAILED


async def test_a_stale_attempt_cannot_touch_the_next_one(
    jobs: JobService, protocol: RuntimePieces, uow: FakeUnitOfWork
) -> None:
    first = await _leased(jobs, protocol)
    await protocol.reports.submit_failure(failure(first))
    uow.clock.advance(3_600)
    (second,) = await protocol.leasing.claim("rt-2", ["synthetic_echo"], 1)
    with pytest.raises(LeaseLostError):
        await protocol.reports.heartbeat(beat(first, "rt-1", 50))
    with pytest.raises(LeaseLostError):
        await protocol.reports.submit_result(result(first))
    with pytest.raises(LeaseLostError):
        await protocol.key_access.resolve_credential(
            first.job_id,
            1,
            "rt-1",
            first.lease_token,
            store=None,  # type: ignore[arg-type]
        )
    assert (await protocol.reports.heartbeat(beat(second, "rt-2", 50))).cancel_requested is False
    assert uow.state.jobs[second.job_id]["progress"] == 50


async def test_the_reaper_takes_back_a_silent_lease_and_a_heartbeat_keeps_one(
    jobs: JobService, protocol: RuntimePieces, reaper: Reaper, uow: FakeUnitOfWork
) -> None:
    quiet = await _leased(jobs, protocol, "rt-quiet")
    alive = await _leased(jobs, protocol, "rt-alive")
    uow.clock.advance(10)  # both 10 s leases end now; the grace runs 30 s more
    await protocol.reports.heartbeat(beat(alive, "rt-alive", 10))
    assert await reaper.reap_once() == 0
    uow.clock.advance(31)
    assert await reaper.reap_once() == 1
    assert uow.state.jobs[quiet.job_id]["lifecycleStatus"] == "queued"
    assert uow.state.jobs[quiet.job_id]["errorCode"] == "JOB_TIMEOUT"
    assert uow.state.jobs[alive.job_id]["lifecycleStatus"] == "running"
    with pytest.raises(LeaseLostError):
        await protocol.reports.heartbeat(beat(quiet, "rt-quiet", 10))


async def test_an_undelivered_lease_goes_back_without_spending_an_attempt(
    jobs: JobService, protocol: RuntimePieces, uow: FakeUnitOfWork
) -> None:
    lease = await _leased(jobs, protocol)
    assert await protocol.leasing.release_undelivered(lease, "rt-1")
    job = uow.state.jobs[lease.job_id]
    assert (job["lifecycleStatus"], job["attemptCount"], job["maxAttempts"]) == ("queued", 0, 3)
    again = await protocol.leasing.lock(lease.job_id, "rt-2")
    assert again.attempt_no == 1  # the attempt went back with the lease: "1/3", not "2/4"
    assert again.lease_token != lease.lease_token  # ...under a token the old lease lacks
    with pytest.raises(LeaseLostError):
        await protocol.reports.heartbeat(beat(lease, "rt-2", 10))
    assert not await protocol.leasing.release_undelivered(lease, "rt-1")  # the old lease is gone


async def test_a_job_waiting_for_its_retry_cannot_be_locked(
    jobs: JobService, protocol: RuntimePieces
) -> None:
    lease = await _leased(jobs, protocol)
    await protocol.reports.submit_failure(failure(lease))
    with pytest.raises(JobLockConflictError, match="waiting for a retry"):
        await protocol.leasing.lock(lease.job_id, "rt-1")


async def test_the_largest_retry_after_requeues_within_the_cap(
    jobs: JobService, protocol: RuntimePieces, uow: FakeUnitOfWork
) -> None:
    lease = await _leased(jobs, protocol)
    report = FailureReport(
        lease.job_id,
        1,
        "rt-1",
        "MODEL_RATE_LIMIT",
        True,
        "",
        "",
        315_576_000_000_000,
        None,
        lease.lease_token,
    )
    outcome = await protocol.reports.submit_failure(report)
    assert outcome.status is S.QUEUED and outcome.next_attempt_at is not None
    assert (outcome.next_attempt_at - uow.clock.now).total_seconds() <= 600


async def test_a_long_retry_after_cannot_keep_a_job_past_its_deadline(
    jobs: JobService, protocol: RuntimePieces, reaper: Reaper, uow: FakeUnitOfWork
) -> None:
    """A job's time in the queue is bounded by its deadline, whatever wait a Retry-After asks:
    the retry is parked past the deadline, and the deadline ends it (JOB_EXPIRED)."""
    job, _ = await jobs.create(command(deadline=uow.clock.now + timedelta(seconds=60)))
    (lease,) = await protocol.leasing.claim("rt-1", ["synthetic_echo"], 1)
    report = dataclasses.replace(failure(lease), retry_after_ms=3_600_000)
    outcome = await protocol.reports.submit_failure(report)
    assert outcome.status is S.QUEUED and outcome.next_attempt_at is not None
    assert outcome.next_attempt_at > uow.clock.now + timedelta(seconds=60)
    uow.clock.advance(61)
    assert await reaper.reap_once() == 1
    row = uow.state.jobs[job.id]
    assert (row["lifecycleStatus"], row["errorCode"]) == ("failed", "JOB_EXPIRED")


def _congested(lease: LeasePayload, code: str, retry_after_ms: int = 0) -> FailureReport:
    return FailureReport(
        lease.job_id,
        lease.attempt_no,
        "rt-1",
        code,
        True,
        "",
        "",
        retry_after_ms,
        None,
        lease.lease_token,
    )


async def test_429s_and_a_shutdown_do_not_spend_attempts(
    jobs: JobService, protocol: RuntimePieces, uow: FakeUnitOfWork
) -> None:
    """A job that met three 429s and one runtime shutdown still succeeds with
    maxAttempts = 2, and one real failure after them still leaves it its second attempt."""
    snapshot = {"learner": {"id": "l-1"}, "material": {"id": "m-1", "title": "Cells"}}
    job, _ = await jobs.create(command(job_type="quiz_generation", snapshot=snapshot))
    assert job.maxAttempts == 2
    reports = ["MODEL_RATE_LIMIT"] * 3 + ["RUNTIME_SHUTDOWN", "MODEL_TIMEOUT"]
    for attempt, code in enumerate(reports, start=1):
        (lease,) = await protocol.leasing.claim("rt-1", ["quiz_generation"], 1)
        assert (lease.job_id, lease.attempt_no) == (job.id, attempt)
        outcome = await protocol.reports.submit_failure(
            _congested(lease, code, retry_after_ms=3_000)
        )
        assert outcome.status is S.QUEUED, code
        assert outcome.next_attempt_at is not None
        assert (outcome.next_attempt_at - uow.clock.now).total_seconds() >= 3  # Retry-After
        uow.clock.advance(3_600)
    (lease,) = await protocol.leasing.claim("rt-1", ["quiz_generation"], 1)
    assert lease.attempt_no == 6  # the number grows: a stale report of attempt 5 is fenced
    await protocol.reports.submit_result(result(lease, output=QUIZ))
    done, _ = await jobs.get("user-1", job.id)
    assert (done.lifecycleStatus, done.attemptCount, done.waivedAttempts) == (S.SUCCEEDED, 6, 4)
    with pytest.raises(LeaseLostError):
        await protocol.reports.submit_failure(
            _congested(dataclasses.replace(lease, attempt_no=5), "MODEL_TIMEOUT")
        )


async def test_a_real_failure_after_waived_ones_still_ends_the_job_at_max_attempts(
    jobs: JobService, protocol: RuntimePieces, uow: FakeUnitOfWork
) -> None:
    job, _ = await jobs.create(command())  # synthetic_echo: 3 attempts
    codes = ["MODEL_RATE_LIMIT", "MODEL_TIMEOUT", "MODEL_TIMEOUT", "MODEL_TIMEOUT"]
    statuses = []
    for code in codes:
        (lease,) = await protocol.leasing.claim("rt-1", ["synthetic_echo"], 1)
        statuses.append((await protocol.reports.submit_failure(_congested(lease, code))).status)
        uow.clock.advance(3_600)
    assert statuses == [S.QUEUED, S.QUEUED, S.QUEUED, S.FAILED]
    failed, _ = await jobs.get("user-1", job.id)
    assert (failed.attemptCount, failed.waivedAttempts, failed.errorCode) == (
        4,
        1,
        "MODEL_TIMEOUT",
    )

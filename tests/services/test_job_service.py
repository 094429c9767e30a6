"""JobService over the in-memory unit of work: creates, idempotency, limits, reads, cancels,
paging, and the events and wake-ups each commit brings."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scheduler_service.core.commands import CreateJobCommand, JobFilter
from scheduler_service.core.errors import (
    IdempotencyKeyReusedError,
    InvalidRequestError,
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRetryableError,
    LimitExceededError,
    UnknownJobTypeError,
)
from scheduler_service.core.events import EventType
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.services.jobs import JobService
from shared.error_codes import ErrorCode
from tests.services.conftest import WakeupLog
from tests.support.fake_uow import FakeUnitOfWork

S = LifecycleStatus


def command(user: str = "user-1", **fields: Any) -> CreateJobCommand:
    values: dict[str, Any] = {"snapshot": {"text": "hello"}, "params": {}}
    values.update(fields)
    return CreateJobCommand(
        user_id=user, job_type=values.pop("job_type", "synthetic_echo"), **values
    )


async def test_a_create_writes_the_job_its_snapshot_and_its_event_in_one_commit(
    jobs: JobService, uow: FakeUnitOfWork, wakeups: WakeupLog
) -> None:
    job, created = await jobs.create(command())
    assert created and job.lifecycleStatus is S.QUEUED and job.attemptCount == 0
    assert uow.commits == 1
    assert uow.state.snapshots[job.id] == ({"text": "hello"}, {})
    assert [(e.event_type, e.job_id) for e in uow.state.events] == [(EventType.ENQUEUE, job.id)]
    # Wake-ups come after the commit: the outbox, the job's watchers, then dispatch.
    assert wakeups.seen == ["outbox:ai.job.enqueue", f"changed:{job.id}", "dispatch"]


async def test_a_refused_create_writes_nothing_and_wakes_nobody(
    jobs: JobService, uow: FakeUnitOfWork, wakeups: WakeupLog
) -> None:
    with pytest.raises(UnknownJobTypeError) as unknown:
        await jobs.create(command(job_type="no_such_type"))
    # The refusal names what would have been right.
    assert "synthetic_echo" in str(unknown.value)
    with pytest.raises(InvalidRequestError) as model:
        await jobs.create(command(model="no-such-model"))
    assert model.value.field == "model" and "deepseek-v4-pro" in str(model.value)
    with pytest.raises(InvalidRequestError) as caught:
        await jobs.create(command(priority=101))
    assert caught.value.field == "priority"
    with pytest.raises(InvalidRequestError):
        await jobs.create(command(user=""))
    assert (uow.state.jobs, uow.state.events, wakeups.seen) == ({}, [], [])


async def test_idempotency_returns_the_first_job_and_refuses_a_changed_request(
    jobs: JobService, uow: FakeUnitOfWork
) -> None:
    first, created = await jobs.create(command(idempotency_key="k-1"))
    again, created_again = await jobs.create(command(idempotency_key="k-1"))
    assert created and not created_again and again.id == first.id
    with pytest.raises(IdempotencyKeyReusedError):
        await jobs.create(command(idempotency_key="k-1", snapshot={"text": "other"}))
    other_user, created_other = await jobs.create(command("user-2", idempotency_key="k-1"))
    assert created_other and other_user.id != first.id
    assert len(uow.state.jobs) == 2


async def test_the_active_job_cap_is_per_user(jobs: JobService) -> None:
    for _ in range(5):
        await jobs.create(command())
    with pytest.raises(LimitExceededError) as caught:
        await jobs.create(command())
    assert caught.value.code is ErrorCode.TOO_MANY_JOBS
    await jobs.create(command("user-2"))


async def test_another_users_job_is_not_found(jobs: JobService) -> None:
    job, _ = await jobs.create(command())
    found, artifacts = await jobs.get("user-1", job.id)
    assert (found.id, artifacts) == (job.id, [])
    with pytest.raises(JobNotFoundError):
        await jobs.get("user-2", job.id)
    with pytest.raises(JobNotFoundError):
        await jobs.cancel("user-2", job.id)
    assert (await jobs.get_any(job.id))[0].id == job.id


async def test_cancel_of_a_queued_job_ends_it_with_its_event(
    jobs: JobService, uow: FakeUnitOfWork, wakeups: WakeupLog
) -> None:
    job, _ = await jobs.create(command())
    wakeups.seen.clear()
    cancelled, outcome = await jobs.cancel("user-1", job.id)
    assert (outcome, cancelled.lifecycleStatus) == ("cancelled", S.CANCELLED)
    assert uow.state.events[-1].event_type is EventType.CANCELLED
    assert wakeups.seen == ["outbox:ai.job.cancelled", f"changed:{job.id}", f"ended:{job.id}"]
    with pytest.raises(JobNotCancellableError):
        await jobs.cancel("user-1", job.id)


async def test_cancel_of_a_running_job_asks_its_runtime_once(
    jobs: JobService, uow: FakeUnitOfWork, wakeups: WakeupLog
) -> None:
    job, _ = await jobs.create(command())
    await uow.run(lambda tx: tx.jobs.lock(job.id, "rt-1"))
    wakeups.seen.clear()
    running, outcome = await jobs.cancel("user-1", job.id)
    assert (outcome, running.lifecycleStatus) == ("cancel_requested", S.RUNNING)
    assert running.cancelRequestedAt is not None
    # One touch of the watchers and one notice to the stream, after the commit.
    assert wakeups.seen == [f"changed:{job.id}", f"cancel:{job.id}"]


async def test_cancel_user_jobs_reaches_queued_and_running_jobs(
    jobs: JobService, uow: FakeUnitOfWork
) -> None:
    await jobs.create(command())
    running, _ = await jobs.create(command())
    await uow.run(lambda tx: tx.jobs.lock(running.id, "rt-1"))
    await jobs.create(command("user-2"))
    assert await jobs.cancel_user_jobs("user-1") == (1, 1)
    assert await jobs.cancel_user_jobs("user-1") == (0, 0)


async def test_pages_walk_every_job_once_newest_first(
    jobs: JobService, uow: FakeUnitOfWork
) -> None:
    created = []
    for _ in range(5):
        job, _ = await jobs.create(command())
        created.append(job.id)
        uow.clock.advance(1)
    seen: list[str] = []
    token = ""
    while True:
        page, token = await jobs.list_jobs(JobFilter(user_id="user-1"), 3, token)
        seen += [j.id for j in page]
        if not token:
            break
    assert seen == created[::-1]
    with pytest.raises(InvalidRequestError):
        await jobs.list_jobs(JobFilter(user_id="user-1", lifecycle_status="done"), 3, "")


async def test_retry_makes_a_new_job_from_a_cancelled_one_once(
    jobs: JobService, uow: FakeUnitOfWork
) -> None:
    job, _ = await jobs.create(command(snapshot={"text": "again"}))
    with pytest.raises(JobNotRetryableError):
        await jobs.retry(job.id)
    await jobs.cancel("user-1", job.id)
    retried = await jobs.retry(job.id)
    assert retried.id != job.id and retried.retriedFromJobId == job.id
    assert uow.state.snapshots[retried.id][0] == {"text": "again"}
    assert (await jobs.retry(job.id)).id == retried.id


async def test_creates_that_arrive_together_share_one_commit_each_with_its_own_answer(
    jobs: JobService, uow: FakeUnitOfWork
) -> None:
    commands = [command(f"user-{i % 3}") for i in range(6)]
    commands += [command(job_type="no_such_type"), command("user-1", idempotency_key="k")]
    commands += [command("user-1", idempotency_key="k")]

    results = await asyncio.gather(*(jobs.create(cmd) for cmd in commands), return_exceptions=True)

    assert uow.commits == 1
    created = [r for r in results if isinstance(r, tuple)]
    assert len(created) == 8 and len({job.id for job, _ in created}) == 7
    assert isinstance(results[6], UnknownJobTypeError)
    # The same key twice in one gathering: one job, the second call a repeat.
    assert results[7][0].id == results[8][0].id  # type: ignore[index]
    assert (results[7][1], results[8][1]) == (True, False)  # type: ignore[index]


async def test_a_gathering_that_fails_as_a_whole_creates_each_job_alone(
    jobs: JobService, uow: FakeUnitOfWork, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_many = jobs.create_many

    async def poisoned(commands: list[CreateJobCommand], **kwargs: Any) -> Any:
        if any(cmd.user_id == "poison" for cmd in commands):
            raise RuntimeError("this create breaks its whole transaction")
        return await create_many(commands, **kwargs)

    monkeypatch.setattr(jobs, "create_many", poisoned)
    users = ["user-1", "poison", "user-2"]

    results = await asyncio.gather(
        *(jobs.create(command(user)) for user in users), return_exceptions=True
    )

    assert isinstance(results[1], RuntimeError)
    assert [type(r) for r in (results[0], results[2])] == [tuple, tuple]
    assert len(uow.state.jobs) == 2

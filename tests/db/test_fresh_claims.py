"""The claim of jobs not yet written (``claim_batches(fresh=...)``) and their insert already
leased (``create_many(leased=...)``), on SQLite and MariaDB: one transaction, as a create runs
them."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.core.fairness import RunningCaps
from scheduler_service.core.job_definitions import USER_KEY_MODE
from scheduler_service.core.lease_tokens import digest
from scheduler_service.core.model_keys import FlowPolicy, ModelKeyLimits
from scheduler_service.core.records import JobRecord, LeaseGrant, NewJob, Placement
from scheduler_service.ports import Transaction
from tests.support.db import create_job, make_job, raw_row
from tests.support.store import StoreCalls

TYPES = ["synthetic_echo"]


async def _create_for(
    repo: StoreCalls, demands: list[tuple[str, int]], **judging: Any
) -> tuple[list[list[LeaseGrant]], dict[str, JobRecord] | None, list[str]]:
    """Two new jobs of one user, offered to ``demands`` before their insert, then inserted:
    the grants, the rows as written, and the jobs' ids."""
    jobs: list[tuple[NewJob, dict[str, Any], dict[str, Any]]] = [
        (make_job(user_id="user-f"), {"text": "hi"}, {}) for _ in range(2)
    ]

    async def work(
        tx: Transaction,
    ) -> tuple[list[list[LeaseGrant]], dict[str, JobRecord] | None]:
        shares = await tx.jobs.claim_batches(TYPES, demands, fresh=jobs, **judging)
        leased = {
            grant.job_id: Placement(holder, grant.lease_token, grant.lock_until)
            for (holder, _), share in zip(demands, shares, strict=True)
            for grant in share
        }
        places = await tx.gates.fair_places([job for job, _, _ in jobs])
        written = await tx.jobs.create_many(jobs, places, leased=leased)
        return shares, written

    shares, written = await repo.uow.run(work)
    return shares, written, [job.job_id for job, _, _ in jobs]


async def test_fresh_jobs_are_dealt_and_written_leased(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    shares, written, ids = await _create_for(repo, [("rt-a", 1), ("rt-b", 1)])
    assert [[grant.job_id for grant in share] for share in shares] == [[ids[0]], [ids[1]]]
    for holder, (grant,) in zip(("rt-a", "rt-b"), shares, strict=True):
        row = await raw_row(engine, grant.job_id)
        assert (row["lifecycleStatus"], row["lockedBy"], row["attemptCount"]) == (
            "running",
            holder,
            1,
        )
        assert row["leaseTokenHash"] == digest(grant.lease_token)
        assert row["lockedAt"] == row["startedAt"] == row["availableAt"]
        # The row as the insert wrote it is the row as it is read.
        record = await repo.get(grant.job_id)
        assert written is None or written[grant.job_id] == record


async def test_no_fresh_job_goes_before_a_waiting_one(
    repo: StoreCalls, engine: AsyncEngine
) -> None:
    await create_job(repo, engine)
    shares, written, ids = await _create_for(repo, [("rt-a", 2)])
    assert shares == [[]]
    for job_id in ids:
        assert (await raw_row(engine, job_id))["lifecycleStatus"] == "queued"
        assert written is None or written[job_id].lifecycleStatus.value == "queued"


async def test_fresh_jobs_are_judged_as_queued_ones(repo: StoreCalls, engine: AsyncEngine) -> None:
    """A running cap of one for the user: one of its two new jobs is written leased."""
    shares, _, ids = await _create_for(
        repo,
        [("rt-a", 2)],
        running_caps=RunningCaps(1),
        flow=FlowPolicy(ModelKeyLimits(), USER_KEY_MODE),
    )
    assert [[grant.job_id for grant in share] for share in shares] == [[ids[0]]]
    assert (await raw_row(engine, ids[1]))["lifecycleStatus"] == "queued"

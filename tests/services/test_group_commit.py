"""Group commit over the in-memory unit of work: each report of a batch gets the answer its unary
call would get, and only the acceptable ones write."""

from __future__ import annotations

from scheduler_service.core.events import EventType
from scheduler_service.core.model_keys import FlowPolicy
from scheduler_service.services.group_commit import GroupCommit
from scheduler_service.services.jobs import JobService
from scheduler_service.services.runtime_pieces import RuntimePieces
from tests.support.fake_uow import FakeUnitOfWork
from tests.support.mixed_batch import run_mixed_batch
from tests.support.schedulers import fast_registry


async def test_a_mixed_batch_answers_each_report_and_writes_only_the_good_one(
    jobs: JobService, protocol: RuntimePieces, uow: FakeUnitOfWork
) -> None:
    async def advance(_job_id: str) -> None:
        uow.clock.advance(3_600)

    leases = await run_mixed_batch(
        jobs,
        protocol,
        GroupCommit(
            protocol.settlement,
            uow,
            fast_registry(),
            FlowPolicy(),
            chunks_per_attempt=1_000,
            max_output_bytes=64 * 1024,
        ),
        advance,
    )
    state = uow.state.jobs
    assert state[leases["good"].job_id]["lifecycleStatus"] == "succeeded"
    for role in ("stale", "hashed", "other", "beat"):
        assert state[leases[role].job_id]["lifecycleStatus"] == "running", role
    assert state[leases["beat"].job_id]["progress"] == 40
    completed = [e.job_id for e in uow.state.events if e.event_type is EventType.COMPLETED]
    assert completed == [leases["good"].job_id]
    assert set(uow.state.artifacts) == {leases["good"].job_id}

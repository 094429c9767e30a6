"""Identifiers compare byte for byte: a user id or idempotency key that differs from
another by case, width or a trailing space is a different identifier — or refused at the edge —
on every RPC, in the per-user caps and in CancelUserJobs. Real MariaDB, real gRPC."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from devtools.harness.runtime_client import JobClient
from devtools.harness.tokens import ADMIN_TOKEN, bearer
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.status_details import error_reason
from tests.support.schedulers import RunningScheduler, SchedulerFactory

pytestmark = pytest.mark.mysql

OWNER = "alice-col"
#: Accepted at the edge: distinct users under the binary collation.
CASE_VARIANTS = ("ALICE-COL", "Alice-Col", "alice-coL")
#: Refused at the edge: no two spellings of one id can live side by side.
REFUSED_VARIANTS = (
    "alice-col ",
    " alice-col",
    "alice-col\t",
    "\uff41\uff4c\uff49\uff43\uff45-col",  # fullwidth
    "alicé-col",
)


async def _error(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


async def _first(call: Any) -> Any:
    async for item in call:
        return item
    return None


@pytest.fixture
async def capped(mysql_url: str, start_scheduler: SchedulerFactory) -> RunningScheduler:
    return await start_scheduler(mysql_url, max_active_jobs_per_user=2)


async def test_case_variants_of_a_user_see_cancel_and_count_nothing_of_the_user(
    capped: RunningScheduler,
) -> None:
    owner = JobClient(capped.channel, OWNER)
    mine = [await owner.create(idempotency_key="Key-1"), await owner.create()]
    for variant in CASE_VARIANTS:
        other = JobClient(capped.channel, variant)
        for job in mine:
            for call in (
                other.get(job.job_id),
                other.cancel(job.job_id),
                _first(
                    other.stub.WatchJob(
                        job_pb.WatchJobRequest(job_id=job.job_id), metadata=other.metadata
                    )
                ),
                _first(other.stream_output(job.job_id)),
            ):
                error = await _error(call)
                assert (error.code(), error_reason(error)) == (
                    grpc.StatusCode.NOT_FOUND,
                    "JOB_NOT_FOUND",
                )
        listed = await other.stub.ListJobs(job_pb.ListJobsRequest(), metadata=other.metadata)
        assert list(listed.jobs) == []
        # The owner is at the cap of 2; the variant is not, and its key is its own.
        theirs = await other.create(idempotency_key="Key-1")
        assert theirs.job_id not in {j.job_id for j in mine} and theirs.user_id == variant
    for job in mine:
        assert (await owner.get(job.job_id)).lifecycle_status == "queued"
    # The owner is still at its own cap: the variants' jobs did not count against it either.
    error = await _error(owner.create())
    assert error_reason(error) == "TOO_MANY_JOBS"


async def test_spacing_width_and_accent_variants_are_refused_at_the_edge(
    scheduler: RunningScheduler,
) -> None:
    owner = JobClient(scheduler.channel, OWNER)
    job = await owner.create()
    admin = admin_service_pb2_grpc.AdminServiceStub(scheduler.channel)
    admin_md = bearer(ADMIN_TOKEN)
    for variant in REFUSED_VARIANTS:
        error = await _error(
            admin.CancelUserJobs(admin_pb.CancelUserJobsRequest(user_id=variant), metadata=admin_md)
        )
        assert (error.code(), error_reason(error)) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_ARGUMENT",
        )
        error = await _error(
            admin.ListJobs(admin_pb.AdminListJobsRequest(user_id=variant), metadata=admin_md)
        )
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        if variant.strip(" ") == OWNER:  # metadata carries no tabs or non-ASCII text
            other = JobClient(scheduler.channel, variant)
            for call in (other.get(job.job_id), other.create()):
                error = await _error(call)
                assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
                assert "x-user-id" in (error.details() or "")
    assert (await owner.get(job.job_id)).lifecycle_status == "queued"


async def test_cancel_user_jobs_and_admin_filters_match_the_exact_user_only(
    scheduler: RunningScheduler,
) -> None:
    owner = JobClient(scheduler.channel, OWNER)
    job = await owner.create()
    shouty = JobClient(scheduler.channel, "ALICE-COL")
    theirs = await shouty.create()
    admin = admin_service_pb2_grpc.AdminServiceStub(scheduler.channel)
    admin_md = bearer(ADMIN_TOKEN)
    listed = await admin.ListJobs(admin_pb.AdminListJobsRequest(user_id=OWNER), metadata=admin_md)
    assert [j.job_id for j in listed.jobs] == [job.job_id]
    reply = await admin.CancelUserJobs(
        admin_pb.CancelUserJobsRequest(user_id="ALICE-COL"), metadata=admin_md
    )
    assert (reply.cancelled, reply.cancel_requested) == (1, 0)
    assert (await owner.get(job.job_id)).lifecycle_status == "queued"
    assert (await shouty.get(theirs.job_id)).lifecycle_status == "cancelled"


async def test_idempotency_keys_compare_byte_for_byte(scheduler: RunningScheduler) -> None:
    owner = JobClient(scheduler.channel, OWNER)
    first = await owner.create(idempotency_key="order-17")
    for variant in ("ORDER-17", "Order-17"):
        assert (await owner.create(idempotency_key=variant)).job_id != first.job_id
    assert (await owner.create(idempotency_key="order-17")).job_id == first.job_id
    for refused in ("order-17 ", "\uff4f\uff52\uff44\uff45\uff52-17", "order 17"):
        error = await _error(owner.create(idempotency_key=refused))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "idempotency_key" in (error.details() or "")


async def test_an_explicit_default_priority_is_the_same_request(
    scheduler: RunningScheduler,
) -> None:
    owner = JobClient(scheduler.channel, OWNER)
    first = await owner.create(idempotency_key="same")
    again = await owner.create(idempotency_key="same", priority=first.priority)
    assert again.job_id == first.job_id
    error = await _error(owner.create(idempotency_key="same", priority=first.priority + 1))
    assert error_reason(error) == "IDEMPOTENCY_KEY_REUSED"

"""Roles and the audit log: tokens may be named (``name=token``), a viewer token reads every admin
view and changes nothing, and every admin action — whichever client sent it, refused or not — is
in the audit log with who did it, what it named, the outcome and what it did
(``ListAuditEntries``). A bulk action, once accepted, runs to its end whatever its client does."""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest
from google.protobuf import message_factory

from devtools.harness.runtime_client import ClientRuntime, JobClient
from devtools.harness.tokens import ADMIN_TOKEN, bearer
from devtools.harness.waiting import eventually
from scheduler_service.api.auth import VIEWER_METHODS
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc as admin_grpc
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.status_details import error_reason
from tests.support.db_checks import JOBS, count
from tests.support.schedulers import RunningScheduler, SchedulerFactory

pytestmark = pytest.mark.mysql

ALICE = "alice-admin-token-0123456789"
BOB = "bob-viewer-token-0123456789ab"
ADMIN_METHODS = admin_pb.DESCRIPTOR.services_by_name["AdminService"].methods


@pytest.fixture
async def scheduler(mysql_url: str, start_scheduler: SchedulerFactory) -> RunningScheduler:
    return await start_scheduler(
        mysql_url, admin_tokens=f"{ADMIN_TOKEN},ops-alice={ALICE}", viewer_tokens=f"bob={BOB}"
    )


async def _call(scheduler: RunningScheduler, method: Any, token: str) -> grpc.StatusCode:
    request = message_factory.GetMessageClass(method.input_type)()
    stub = admin_grpc.AdminServiceStub(scheduler.channel)
    try:
        await getattr(stub, method.name)(request, metadata=bearer(token), timeout=30)
    except grpc.aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK


async def test_a_viewer_reads_every_admin_view_and_changes_nothing(
    scheduler: RunningScheduler,
) -> None:
    assert {m.name for m in ADMIN_METHODS} >= VIEWER_METHODS
    for method in ADMIN_METHODS:
        code = await _call(scheduler, method, BOB)
        if method.name in VIEWER_METHODS:
            assert code is not grpc.StatusCode.PERMISSION_DENIED, method.name
        else:
            assert code is grpc.StatusCode.PERMISSION_DENIED, method.name
    # Its refusals changed nothing, and each is recorded with its name and the refusal.
    entries = await admin_grpc.AdminServiceStub(scheduler.channel).ListAuditEntries(
        admin_pb.ListAuditEntriesRequest(page_size=500), metadata=bearer(BOB)
    )
    actions = {m.name for m in ADMIN_METHODS} - VIEWER_METHODS
    assert sorted(e.action for e in entries.entries) == sorted(actions)
    assert {(e.actor, e.role, e.outcome) for e in entries.entries} == {
        ("bob", "viewer", "PERMISSION_DENIED")
    }
    assert all("a viewer token reads the admin views" in e.detail for e in entries.entries)


async def test_every_admin_action_is_in_the_audit_log(scheduler: RunningScheduler) -> None:
    stub = admin_grpc.AdminServiceStub(scheduler.channel)
    alice = bearer(ALICE)
    await stub.CancelUserJobs(admin_pb.CancelUserJobsRequest(user_id="u-gone"), metadata=alice)
    limit = admin_pb.ModelLimit(
        provider="deepseek", model="deepseek-v4-pro", credential_scope="platform", max_concurrency=3
    )
    await stub.PutModelLimit(admin_pb.PutModelLimitRequest(limit=limit), metadata=alice)
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await stub.RetryJob(admin_pb.RetryJobRequest(job_id="no-such-job"), metadata=alice)
    assert error_reason(missing.value) == "JOB_NOT_FOUND"
    # An unnamed token is recorded by its digest, never by the token itself.
    await stub.RedriveDeadEvents(admin_pb.RedriveDeadEventsRequest(), metadata=bearer(ADMIN_TOKEN))
    await stub.GetQueueStats(admin_pb.GetQueueStatsRequest(), metadata=alice)  # a read: not logged

    first = await stub.ListAuditEntries(
        admin_pb.ListAuditEntriesRequest(page_size=2), metadata=bearer(BOB)
    )
    rest = await stub.ListAuditEntries(
        admin_pb.ListAuditEntriesRequest(page_size=2, page_token=first.next_page_token),
        metadata=bearer(BOB),
    )
    assert rest.next_page_token == ""
    entries = [*first.entries, *rest.entries]
    assert [(e.action, e.outcome) for e in entries] == [
        ("RedriveDeadEvents", "OK"),
        ("RetryJob", "NOT_FOUND"),
        ("PutModelLimit", "OK"),
        ("CancelUserJobs", "OK"),
    ]
    assert [e.actor for e in entries[1:]] == ["ops-alice"] * 3
    assert entries[0].actor.startswith("token-") and ADMIN_TOKEN not in entries[0].actor
    assert all(e.role == "admin" for e in entries)
    assert json.loads(entries[1].target_json) == {"jobId": "no-such-job"}
    assert json.loads(entries[2].target_json)["limit"]["maxConcurrency"] == 3
    assert json.loads(entries[3].detail) == {}  # nothing of u-gone's to cancel
    assert "no-such-job" in entries[1].detail
    ids = [int(e.entry_id) for e in entries]
    assert ids == sorted(ids, reverse=True)


async def test_the_consoles_views_a_cancel_by_an_operator_and_what_a_viewer_is_not_shown(
    scheduler: RunningScheduler,
) -> None:
    """AdminService.CancelJob, GetJobTimeline, ListJobTypes, ListJobs by error code and the jobs
    that ended in the last hour: what the console reads; the internal error message is an
    operator's, not a viewer's."""
    jobs = JobClient(scheduler.channel, "user-console")
    admin = admin_grpc.AdminServiceStub(scheduler.channel)
    for _ in range(2):
        await jobs.create()
    runtime = ClientRuntime(scheduler.channel, "rt-console")
    await runtime.connect()
    runtime.credit(2)
    lease, held = await runtime.next_lease(), await runtime.next_lease()
    await runtime.fail(lease, "MODEL_BAD_REQUEST", retryable=False)

    cancelled = await admin.CancelJob(
        job_pb.CancelJobRequest(job_id=held.job_id), metadata=bearer(ALICE)
    )
    assert cancelled.outcome == "cancel_requested"
    timeline = await admin.GetJobTimeline(
        admin_pb.GetJobTimelineRequest(job_id=lease.job_id), metadata=bearer(BOB)
    )
    assert [e.event_type for e in timeline.events] == ["ai.job.enqueue", "ai.job.failed"]
    by_code = await admin.ListJobs(
        admin_pb.AdminListJobsRequest(error_code="MODEL_BAD_REQUEST"), metadata=bearer(BOB)
    )
    assert [j.job_id for j in by_code.jobs] == [lease.job_id]
    assert by_code.jobs[0].internal_error_message == ""  # a viewer's view
    seen = await admin.GetJob(job_pb.GetJobRequest(job_id=lease.job_id), metadata=bearer(ALICE))
    assert seen.error_code == "MODEL_BAD_REQUEST"
    stats = await admin.GetQueueStats(admin_pb.GetQueueStatsRequest(), metadata=bearer(BOB))
    assert [(d.job_type, d.lifecycle_status, d.count) for d in stats.finished_last_hour] == [
        ("synthetic_echo", "failed", 1)
    ]
    types = await admin.ListJobTypes(job_pb.ListJobTypesRequest(), metadata=bearer(BOB))
    assert "quiz_generation" in {t.job_type for t in types.job_types}
    entries = await admin.ListAuditEntries(admin_pb.ListAuditEntriesRequest(), metadata=bearer(BOB))
    assert [(e.actor, e.action) for e in entries.entries] == [("ops-alice", "CancelJob")]
    await runtime.close()


async def test_a_bulk_cancel_runs_to_its_end_after_its_client_goes_away(
    scheduler: RunningScheduler,
) -> None:
    jobs = JobClient(scheduler.channel, "user-leaving")
    total = 100  # the per-user cap of active jobs
    for _ in range(total):
        await jobs.create()
    admin = admin_grpc.AdminServiceStub(scheduler.channel)
    call = admin.CancelUserJobs(
        admin_pb.CancelUserJobsRequest(user_id="user-leaving"), metadata=bearer(ALICE)
    )
    engine = scheduler.app.engine

    async def cancelled() -> int:
        return await count(engine, JOBS, userId="user-leaving", lifecycleStatus="cancelled")

    async def started() -> bool:
        return await cancelled() > 0 or call.done()

    await eventually(started)
    call.cancel()  # the client goes away mid-action (or just after it ended)

    async def recorded() -> bool:
        entries = await admin.ListAuditEntries(
            admin_pb.ListAuditEntriesRequest(), metadata=bearer(BOB)
        )
        return any(e.action == "CancelUserJobs" for e in entries.entries)

    await eventually(recorded)
    assert await cancelled() == total
    entries = await admin.ListAuditEntries(admin_pb.ListAuditEntriesRequest(), metadata=bearer(BOB))
    (entry,) = [e for e in entries.entries if e.action == "CancelUserJobs"]
    assert (entry.actor, entry.outcome) == ("ops-alice", "OK")
    assert json.loads(entry.detail) == {"cancelled": str(total)}  # int64 in JSON: a string

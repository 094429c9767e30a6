"""Job trees on real MariaDB over real gRPC, with in-test runtimes: who may take children, a
waiting parent and its fan-in, the join policies, ``max_parallel``, and a cancel that reaches
every descendant (docs/architecture.md, *Job trees*)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import grpc
import pytest
from google.protobuf import json_format
from sqlalchemy import Table, func, select

from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output, working
from devtools.harness.tokens import ADMIN_TOKEN, bearer
from devtools.harness.waiting import eventually
from scheduler_service.sql.db.models import QuizQuestion
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc, types_pb2
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.job_types.quiz_generation import sample_output
from shared.status_details import error_reason
from tests.support.db_checks import JOBS, events, job_row
from tests.support.schedulers import RunningScheduler, SchedulerFactory

pytestmark = pytest.mark.mysql

QUESTIONS = cast(Table, QuizQuestion.__table__)


async def _error(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


async def _status(scheduler: RunningScheduler, job_id: str) -> str:
    return str((await job_row(scheduler.app.engine, job_id))["lifecycleStatus"])


async def _ends(scheduler: RunningScheduler, job_id: str, status: str) -> None:
    async def check() -> bool:
        return await _status(scheduler, job_id) == status

    await eventually(check)


async def _children(jobs: JobClient, parent: str, n: int, **fields: Any) -> list[str]:
    return [
        (await jobs.create(snapshot={"text": f"child {i}"}, parent_job_id=parent, **fields)).job_id
        for i in range(n)
    ]


async def test_a_parent_must_be_the_callers_open_job_and_the_tree_stays_bounded(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, tree_max_children=2)
    jobs, theirs = JobClient(scheduler.channel), JobClient(scheduler.channel, "user-2")
    parent = (await jobs.create()).job_id
    unknown = "01a24809-f74f-728a-9b7a-1a83f0e54276"
    for client, parent_id in ((jobs, unknown), (theirs, parent)):
        error = await _error(client.create(parent_job_id=parent_id))
        assert error.code() is grpc.StatusCode.NOT_FOUND, error.details()
    # Depth: a root's children are at depth 1; three levels below a root at most.
    chain = parent
    for _ in range(3):
        chain = (await jobs.create(parent_job_id=chain)).job_id
    error = await _error(jobs.create(parent_job_id=chain))
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "AIJOB_TREE_MAX_DEPTH" in (error.details() or "")
    # Breadth: the setting's 2 children per parent.
    await jobs.create(parent_job_id=parent)
    error = await _error(jobs.create(parent_job_id=parent))
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "AIJOB_TREE_MAX_CHILDREN" in (error.details() or "")
    error = await _error(jobs.create(max_parallel=1_000))
    assert (error.code(), error_reason(error)) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_ARGUMENT",
    )
    # A parent that ended (cancelled) takes no child, and says so.
    cancelled = (await jobs.create()).job_id
    await jobs.cancel(cancelled)
    error = await _error(jobs.create(parent_job_id=cancelled))
    assert (error.code(), error_reason(error)) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "JOB_ALREADY_TERMINAL",
    )
    # Nothing was half written by the refusals.
    async with scheduler.app.engine.connect() as conn:
        rows = await conn.scalar(select(func.count()).select_from(JOBS))
    assert rows == 6


async def test_a_waiting_parent_holds_nothing_and_runs_its_own_call_after_its_children(
    scheduler: RunningScheduler,
) -> None:
    jobs = JobClient(scheduler.channel)
    parent = (await jobs.create()).job_id
    children = await _children(jobs, parent, 3)
    job = await jobs.get(parent)
    assert job.lifecycle_status == "waiting"
    assert job.children == types_pb2.ChildCounts(queued=3)
    assert (await jobs.get(children[0])).root_job_id == parent
    listed = await jobs.stub.ListJobs(
        job_pb.ListJobsRequest(parent_job_id=parent), metadata=jobs.metadata
    )
    assert sorted(j.job_id for j in listed.jobs) == sorted(children)
    runtime = ClientRuntime(scheduler.channel, "rt-1", slots=1)
    leased: list[str] = []

    async def finish(rt: ClientRuntime, lease: types_pb2.Lease) -> None:
        leased.append(lease.job_id)
        await rt.submit(lease, echo_output(lease))

    async with working([runtime], finish):
        await _ends(scheduler, parent, "succeeded")
    # The children first, each once; then the parent's own call, once.
    assert sorted(leased[:3]) == sorted(children) and leased[3:] == [parent]
    assert (await events(scheduler.app.engine, parent)).count("ai.job.completed") == 1
    done = await jobs.get(parent)
    assert done.children == types_pb2.ChildCounts(succeeded=3)


async def test_all_success_fails_the_parent_with_the_child_and_cancels_its_siblings(
    scheduler: RunningScheduler,
) -> None:
    jobs = JobClient(scheduler.channel)
    parent = (await jobs.create(max_parallel=1)).job_id
    children = await _children(jobs, parent, 3)
    runtime = ClientRuntime(scheduler.channel, "rt-1", slots=4)

    async def finish(rt: ClientRuntime, lease: types_pb2.Lease) -> None:
        await rt.fail(lease, "INVALID_SNAPSHOT", retryable=False)

    async with working([runtime], finish):
        await _ends(scheduler, parent, "failed")
    job = await jobs.get(parent)
    assert job.error_code == "CHILD_FAILED"
    assert children[0] in job.public_error_message
    statuses = [await _status(scheduler, child) for child in children]
    assert statuses == ["failed", "cancelled", "cancelled"]


async def test_all_done_ends_the_parent_with_what_succeeded(scheduler: RunningScheduler) -> None:
    jobs = JobClient(scheduler.channel)
    parent = (await jobs.create(join_policy=job_pb.JOIN_POLICY_ALL_DONE)).job_id
    children = await _children(jobs, parent, 3)
    runtime = ClientRuntime(scheduler.channel, "rt-1", slots=4)

    async def finish(rt: ClientRuntime, lease: types_pb2.Lease) -> None:
        if lease.job_id == children[1]:
            await rt.fail(lease, "INVALID_SNAPSHOT", retryable=False)
        else:
            await rt.submit(lease, echo_output(lease))

    async with working([runtime], finish):
        await _ends(scheduler, parent, "succeeded")
    done = await jobs.get(parent)
    assert done.children == types_pb2.ChildCounts(succeeded=2, failed=1)
    # Its result names the child that failed, and the code it failed with.
    assert list(done.result.failed_children) == [
        types_pb2.FailedChild(job_id=children[1], error_code="INVALID_SNAPSHOT")
    ]
    tree = await jobs.stub.GetJobTree(
        job_pb.GetJobTreeRequest(job_id=parent), metadata=jobs.metadata
    )
    assert {n.job_id: n.error_code for n in tree.nodes} == {
        parent: "",
        children[0]: "",
        children[1]: "INVALID_SNAPSHOT",
        children[2]: "",
    }


async def test_max_parallel_is_never_exceeded(scheduler: RunningScheduler) -> None:
    jobs = JobClient(scheduler.channel)
    parent = (await jobs.create(max_parallel=2)).job_id
    children = await _children(jobs, parent, 12)
    runtime = ClientRuntime(scheduler.channel, "rt-1", slots=8)
    samples: list[int] = []

    async def running() -> int:
        query = select(func.count()).where(
            JOBS.c.parentJobId == parent, JOBS.c.lifecycleStatus == "running"
        )
        async with scheduler.app.engine.connect() as conn:
            return int(await conn.scalar(query) or 0)

    async def finish(rt: ClientRuntime, lease: types_pb2.Lease) -> None:
        if lease.job_id in children:
            samples.append(await running())
        await rt.submit(lease, echo_output(lease))

    async with working([runtime], finish):
        await _ends(scheduler, parent, "succeeded")
    assert len(samples) == 12 and max(samples) <= 2, samples


async def test_cancel_reaches_every_descendant_and_closes_the_tree(
    scheduler: RunningScheduler,
) -> None:
    jobs = JobClient(scheduler.channel)
    parent = (await jobs.create()).job_id
    middle = (await jobs.create(parent_job_id=parent)).job_id
    below = await _children(jobs, middle, 2)
    runtime = ClientRuntime(scheduler.channel, "rt-1", slots=1)
    await runtime.connect()
    try:
        lease = await runtime.next_lease()
        assert lease.job_id in below
        reply = await jobs.cancel(parent)
        assert (reply.outcome, reply.job.lifecycle_status) == ("cancelled", "cancelled")
        for job_id in (middle, *below):
            assert await _status(scheduler, job_id) == "cancelled"
        assert (await runtime.next_cancel()).job_id == lease.job_id
        # The running child's result is not accepted, and nothing new joins the tree.
        error = await _error(runtime.submit(lease, echo_output(lease)))
        assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
        error = await _error(jobs.create(parent_job_id=middle))
        assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
    finally:
        await runtime.close()


async def test_get_job_tree_rolls_usage_up_over_every_node(scheduler: RunningScheduler) -> None:
    jobs = JobClient(scheduler.channel)
    parent = (await jobs.create()).job_id
    children = await _children(jobs, parent, 2)
    runtime = ClientRuntime(scheduler.channel, "rt-1", slots=2)

    async def finish(rt: ClientRuntime, lease: types_pb2.Lease) -> None:
        await rt.submit(lease, echo_output(lease))

    async with working([runtime], finish):
        await _ends(scheduler, parent, "succeeded")
    tree = await jobs.stub.GetJobTree(
        job_pb.GetJobTreeRequest(job_id=children[0]), metadata=jobs.metadata
    )
    assert tree.nodes[0].job_id == parent
    assert sorted(n.job_id for n in tree.nodes[1:]) == sorted(children)
    assert {n.parent_job_id for n in tree.nodes[1:]} == {parent}
    # Three attempts, each reported 10 prompt and 5 completion tokens.
    assert (tree.prompt_tokens, tree.completion_tokens) == (30, 15)
    error = await _error(
        JobClient(scheduler.channel, "user-2").stub.GetJobTree(
            job_pb.GetJobTreeRequest(job_id=parent),
            metadata=JobClient(scheduler.channel, "user-2").metadata,
        )
    )
    assert error.code() is grpc.StatusCode.NOT_FOUND
    admin = admin_service_pb2_grpc.AdminServiceStub(scheduler.channel)
    listed = await admin.ListJobs(
        admin_pb.AdminListJobsRequest(parent_job_id=parent), metadata=bearer(ADMIN_TOKEN)
    )
    assert sorted(j.job_id for j in listed.jobs) == sorted(children)
    # Operators read any user's tree (viewers too: tests/api/test_roles_and_audit.py).
    seen = await admin.GetJobTree(
        job_pb.GetJobTreeRequest(job_id=parent), metadata=bearer(ADMIN_TOKEN)
    )
    assert seen == tree


async def test_children_created_together_join_once(scheduler: RunningScheduler) -> None:
    """Siblings ending at once on two runtimes queue on their parent's row: it is joined once."""
    jobs = JobClient(scheduler.channel)
    parent = (await jobs.create()).job_id
    await asyncio.gather(*(jobs.create(parent_job_id=parent) for _ in range(8)))
    runtimes = [ClientRuntime(scheduler.channel, f"rt-{n}", slots=4) for n in range(2)]

    async def finish(rt: ClientRuntime, lease: types_pb2.Lease) -> None:
        await rt.submit(lease, echo_output(lease))

    async with working(runtimes, finish):
        await _ends(scheduler, parent, "succeeded")
    assert (await events(scheduler.app.engine, parent)).count("ai.job.enqueue") == 2
    assert (await events(scheduler.app.engine, parent)).count("ai.job.completed") == 1


async def test_create_jobs_makes_a_parent_and_its_children_in_one_call(
    scheduler: RunningScheduler,
) -> None:
    """Children name their parent as "#0", the call's first item: the parent waits from its
    first moment (no runtime can take it before its children exist), and a repeat of the call
    makes nothing new."""
    jobs = JobClient(scheduler.channel)
    items = [job_pb.CreateJobsItem(job=job_pb.CreateJobRequest(job_type="synthetic_echo"))]
    items += [
        job_pb.CreateJobsItem(
            job=job_pb.CreateJobRequest(job_type="synthetic_echo", parent_job_id="#0")
        )
        for _ in range(2)
    ]
    for n, item in enumerate(items):
        item.job.idempotency_key = f"tree-item-{n}"
        item.job.snapshot.update({"n": n})
    request = job_pb.CreateJobsRequest(items=items)
    reply = await jobs.stub.CreateJobs(request, metadata=jobs.metadata)
    parent = reply.results[0].job
    assert parent.lifecycle_status == "waiting"
    assert [r.job.parent_job_id for r in reply.results[1:]] == [parent.job_id] * 2
    again = await jobs.stub.CreateJobs(request, metadata=jobs.metadata)
    assert [r.created for r in again.results] == [False] * 3
    assert (await jobs.get(parent.job_id)).children == types_pb2.ChildCounts(queued=2)
    # "#N" names an earlier item of the same call only.
    error = await _error(jobs.create(parent_job_id="#0"))
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT


async def test_retry_of_a_failed_parent_runs_only_the_child_that_failed(
    scheduler: RunningScheduler,
) -> None:
    jobs = JobClient(scheduler.channel)
    parent = (await jobs.create()).job_id
    doomed, *others = await _children(jobs, parent, 3)
    runtime = ClientRuntime(scheduler.channel, "rt-1", slots=3)
    leased: list[str] = []

    async def others_done() -> bool:
        return all([await _status(scheduler, o) == "succeeded" for o in others])

    async def finish(rt: ClientRuntime, lease: types_pb2.Lease) -> None:
        leased.append(lease.job_id)
        if lease.job_id == doomed:
            await eventually(others_done)  # the siblings' results are in before it fails
            await rt.fail(lease, "INVALID_SNAPSHOT", retryable=False)
        else:
            await rt.submit(lease, echo_output(lease))

    admin = admin_service_pb2_grpc.AdminServiceStub(scheduler.channel)
    async with working([runtime], finish):
        await _ends(scheduler, parent, "failed")
        assert (await jobs.get(parent)).error_code == "CHILD_FAILED"
        leased.clear()
        retried = await admin.RetryJob(
            admin_pb.RetryJobRequest(job_id=parent), metadata=bearer(ADMIN_TOKEN)
        )
        again = await admin.RetryJob(
            admin_pb.RetryJobRequest(job_id=parent), metadata=bearer(ADMIN_TOKEN)
        )
        assert again.job_id == retried.job_id
        await _ends(scheduler, retried.job_id, "succeeded")
    # One child ran again (a new job, retried from the one that failed), then the new parent.
    child = await jobs.get(leased[0])
    assert (child.retried_from_job_id, child.parent_job_id) == (doomed, retried.job_id)
    assert leased[1:] == [retried.job_id]
    assert (await jobs.get(retried.job_id)).children == types_pb2.ChildCounts(succeeded=1)


async def test_a_retried_split_joins_the_kept_results_with_the_new_ones(
    scheduler: RunningScheduler,
) -> None:
    jobs = JobClient(scheduler.channel)
    points = [{"id": "kp-a", "name": "A"}, {"id": "kp-b", "name": "B"}]
    snapshot = {"learner": {"id": "l-1"}, "material": {"id": "m", "title": "T"}}
    request = job_pb.CreateJobRequest(job_type="quiz_generation")
    request.snapshot.update(snapshot | {"knowledgePoints": points})
    request.params.update({"count": 20})
    parent = (await jobs.stub.CreateJob(request, metadata=jobs.metadata)).job.job_id
    runtime = ClientRuntime(scheduler.channel, "rt-1", slots=1, job_types=["quiz_generation"])
    failed_once: list[str] = []

    async def finish(rt: ClientRuntime, lease: types_pb2.Lease) -> None:
        params = json_format.MessageToDict(lease.params)
        if params.get("knowledgePointIds") == ["kp-b"] and not failed_once:
            failed_once.append(lease.job_id)
            await rt.fail(lease, "INVALID_SNAPSHOT", retryable=False)
            return
        await rt.submit(lease, sample_output(json_format.MessageToDict(lease.snapshot), params))

    admin = admin_service_pb2_grpc.AdminServiceStub(scheduler.channel)
    async with working([runtime], finish):
        await _ends(scheduler, parent, "failed")
        retried = await admin.RetryJob(
            admin_pb.RetryJobRequest(job_id=parent), metadata=bearer(ADMIN_TOKEN)
        )
        await _ends(scheduler, retried.job_id, "succeeded")
    async with scheduler.app.engine.connect() as conn:
        rows = (await conn.execute(select(QUESTIONS.c.jobId, QUESTIONS.c.knowledgePointId))).all()
    assert {job_id for job_id, _ in rows} == {retried.job_id}
    assert sorted(point for _, point in rows) == ["kp-a"] * 10 + ["kp-b"] * 10
    assert (await jobs.get(retried.job_id)).children == types_pb2.ChildCounts(succeeded=1)


async def test_the_last_two_children_ending_at_once_on_two_replicas_join_once(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    """Each of a parent's two children is leased on its own replica, and their results come in
    together: the parent's row serializes the two ends, so it is joined once."""
    replicas = [await start_scheduler(mysql_url) for _ in range(2)]
    jobs = JobClient(replicas[0].channel)
    parent = (await jobs.create()).job_id
    await _children(jobs, parent, 2)
    runtimes = [ClientRuntime(r.channel, f"rt-{n}", slots=1) for n, r in enumerate(replicas)]
    for runtime in runtimes:
        await runtime.connect()
    try:
        leases = [await runtime.next_lease() for runtime in runtimes]
        await asyncio.gather(
            *(
                rt.submit(lease, echo_output(lease))
                for rt, lease in zip(runtimes, leases, strict=True)
            )
        )
    finally:
        for runtime in runtimes:
            await runtime.close()
    job = await jobs.get(parent)
    assert (job.lifecycle_status, job.children) == ("queued", types_pb2.ChildCounts(succeeded=2))
    assert (await job_row(replicas[1].app.engine, parent))["childrenOpen"] == 0
    runtime = ClientRuntime(replicas[1].channel, "rt-parent", slots=1)

    async def finish(rt: ClientRuntime, lease: types_pb2.Lease) -> None:
        await rt.submit(lease, echo_output(lease))

    async with working([runtime], finish):
        await _ends(replicas[0], parent, "succeeded")
    assert (await events(replicas[0].app.engine, parent)).count("ai.job.completed") == 1


async def test_watching_a_parent_shows_the_share_of_children_done(
    scheduler: RunningScheduler,
) -> None:
    jobs = JobClient(scheduler.channel)
    parent = (await jobs.create()).job_id
    await _children(jobs, parent, 4)
    call = jobs.stub.WatchJob(job_pb.WatchJobRequest(job_id=parent), metadata=jobs.metadata)
    updates = call.__aiter__()
    first = await updates.__anext__()
    assert (first.lifecycle_status, first.progress) == ("waiting", 0)
    runtime = ClientRuntime(scheduler.channel, "rt-watch", slots=1)
    await runtime.connect()
    try:
        for done in range(1, 4):
            lease = await runtime.next_lease()
            await runtime.submit(lease, echo_output(lease))
            runtime.credit()
            update = await updates.__anext__()
            assert (update.lifecycle_status, update.progress) == ("waiting", 25 * done)
        lease = await runtime.next_lease()
        await runtime.submit(lease, echo_output(lease))
        runtime.credit()
        # The last child's end joins the parent: it is queued for its own call.
        joined = await updates.__anext__()
        assert joined.lifecycle_status == "queued" and joined.children.succeeded == 4
        lease = await runtime.next_lease()
        assert lease.job_id == parent
        await runtime.submit(lease, echo_output(lease))
        statuses = [update.lifecycle_status async for update in updates]
        assert statuses[-1] == "succeeded"
    finally:
        await runtime.close()


async def test_cancel_user_jobs_reaches_a_users_trees(scheduler: RunningScheduler) -> None:
    """An operator's CancelUserJobs (consent withdrawn) cancels a waiting parent and so its whole
    tree, and leaves another user's tree alone."""
    jobs, theirs = JobClient(scheduler.channel), JobClient(scheduler.channel, "user-2")
    parent = (await jobs.create()).job_id
    children = await _children(jobs, parent, 3)
    other = (await theirs.create()).job_id
    await _children(theirs, other, 2)
    admin = admin_service_pb2_grpc.AdminServiceStub(scheduler.channel)
    await admin.CancelUserJobs(
        admin_pb.CancelUserJobsRequest(user_id="user-1"), metadata=bearer(ADMIN_TOKEN)
    )
    assert [await _status(scheduler, j) for j in [parent, *children]] == ["cancelled"] * 4
    assert await _status(scheduler, other) == "waiting"

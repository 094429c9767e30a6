"""Reports on the Poll stream: each ack is exactly what the unary call answers (status, reason,
response), a report that fails never ends the stream, and the stream keeps its leases alive."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.rpc import error_details_pb2

from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from tests.support.db_checks import job_row
from tests.support.schedulers import RunningScheduler, SchedulerFactory

pytestmark = pytest.mark.mysql


def _reason(ack: rt.ReportAck) -> str:
    for detail in ack.status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return str(info.reason)
    return ""


async def test_acks_answer_as_the_unary_calls_do(scheduler: RunningScheduler) -> None:
    runtime = ClientRuntime(scheduler.channel, "rt-s", slots=2)
    await runtime.connect()
    try:
        await JobClient(scheduler.channel).create()
        lease = await runtime.next_lease()
        beat = await runtime.report(
            rt.PollReport(
                heartbeat=rt.HeartbeatRequest(
                    job_id=lease.job_id,
                    attempt_no=1,
                    runtime_instance_id="rt-s",
                    progress=30,
                    lease_token=lease.lease_token,
                )
            )
        )
        assert beat.status.code == 0 and beat.WhichOneof("response") == "heartbeat"
        assert (await job_row(scheduler.app.engine, lease.job_id))["progress"] == 30

        first = await runtime.submit_on_stream(lease, echo_output(lease))
        again = await runtime.submit_on_stream(lease, echo_output(lease))
        assert first.status.code == 0 and not first.result.duplicate
        assert again.status.code == 0 and again.result.duplicate
        assert again.result.result_idempotency_key == first.result.result_idempotency_key

        conflicting = await runtime.submit_on_stream(lease, {"echo": "something else"})
        assert conflicting.status.code == grpc.StatusCode.ALREADY_EXISTS.value[0]
        assert _reason(conflicting) == "RESULT_ALREADY_EXISTS"
        with pytest.raises(grpc.aio.AioRpcError) as unary:
            await runtime.submit(lease, {"echo": "something else"})
        assert unary.value.code() is grpc.StatusCode.ALREADY_EXISTS
        assert conflicting.status.message == unary.value.details()

        late = await runtime.report(
            rt.PollReport(
                heartbeat=rt.HeartbeatRequest(
                    job_id=lease.job_id,
                    attempt_no=1,
                    runtime_instance_id="rt-s",
                    progress=50,
                    lease_token=lease.lease_token,
                )
            )
        )
        assert late.status.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
        assert _reason(late) in {"LEASE_LOST", "JOB_ALREADY_TERMINAL"}

        bad = await runtime.report(
            rt.PollReport(
                result=rt.SubmitResultRequest(
                    job_id=lease.job_id, attempt_no=1, runtime_instance_id="rt-s"
                )
            )
        )
        assert bad.status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
        # A refused report never ends the stream: the next job still arrives on it.
        runtime.credit(1)
        await JobClient(scheduler.channel).create()
        await runtime.next_lease()
    finally:
        await runtime.close()


async def test_a_stream_that_speaks_keeps_its_leases_alive_and_a_silent_one_does_not(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    """Leases of 6 s with 2 s grace; no per-job heartbeat at all. The speaking runtime's lease
    outlives the silent one's, which is reaped. The margins (a keepalive every 0.25 s against an
    alive window of 5 s, extended every 2 s) hold on a loaded machine."""
    scheduler = await start_scheduler(
        mysql_url, lease_ttl_s=6, lease_grace_s=2, reaper_interval_s=0.2, stream_alive_s=5
    )
    jobs = JobClient(scheduler.channel)
    talking = ClientRuntime(scheduler.channel, "rt-talks", slots=1)
    silent = ClientRuntime(scheduler.channel, "rt-silent", slots=1)
    for runtime in (talking, silent):
        await runtime.connect()
    try:
        await jobs.create()
        await jobs.create()
        kept, dropped = await talking.next_lease(), await silent.next_lease()
        reaped_before = await _reaped(scheduler, dropped.job_id)
        assert not reaped_before
        # The keeper runs every TTL/3; three keepalives a TTL keep the stream "alive".
        for _ in range(240):
            talking.keepalive()
            await asyncio.sleep(0.25)  # the runtime's own keepalive period, not a wait on a result
            if await _reaped(scheduler, dropped.job_id):
                break
        assert await _reaped(scheduler, dropped.job_id), "the silent stream's lease was kept"
        row = await job_row(scheduler.app.engine, kept.job_id)
        assert (row["lifecycleStatus"], row["attemptCount"]) == ("running", 1)
    finally:
        await talking.close()
        await silent.close()


async def _reaped(scheduler: RunningScheduler, job_id: str) -> bool:
    return bool(
        (await job_row(scheduler.app.engine, job_id))["attemptCount"] != 1
        or (await job_row(scheduler.app.engine, job_id))["lifecycleStatus"] != "running"
    )

"""Batched frames on the Poll stream: a runtime that subscribes with ``batch_frames``
gets its leases in LeaseBatch frames and its acks in AckBatch frames, credits count leases, and
every report of a ReportBatch keeps its own guard, token and answer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import grpc
import pytest

from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output, working
from devtools.harness.tokens import RUNTIME_TOKEN, bearer
from scheduler_service.core.state_machine import LifecycleStatus
from shared.canonical_json import output_hash
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.gen.aijob.v1 import runtime_service_pb2_grpc, types_pb2
from shared.status_details import error_from_status, error_reason
from tests.support.db_checks import JOBS, count
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql

WAIT_S = 30


class RawStream:
    """A Poll stream on the generated stub, frame by frame."""

    def __init__(self, scheduler: RunningScheduler, slots: int) -> None:
        self._sending: asyncio.Queue[rt.PollRequest] = asyncio.Queue()
        self._sending.put_nowait(
            rt.PollRequest(
                subscribe=rt.PollSubscribe(
                    runtime_instance_id="rt-frames",
                    job_types=["synthetic_echo"],
                    slots=slots,
                    batch_frames=True,
                )
            )
        )
        stub = runtime_service_pb2_grpc.RuntimeServiceStub(scheduler.channel)
        self.call = stub.Poll(self._requests(), metadata=bearer(RUNTIME_TOKEN))
        self.frames: list[str] = []

    async def _requests(self) -> AsyncIterator[rt.PollRequest]:
        while True:
            yield await self._sending.get()

    def send(self, request: rt.PollRequest) -> None:
        self._sending.put_nowait(request)

    async def _frame(self) -> rt.PollResponse:
        message = await asyncio.wait_for(self.call.read(), WAIT_S)
        assert isinstance(message, rt.PollResponse), "the stream ended"
        self.frames.append(str(message.WhichOneof("kind")))
        return message

    async def leases(self, wanted: int) -> list[types_pb2.Lease]:
        leases: list[types_pb2.Lease] = []
        while len(leases) < wanted:
            leases.extend((await self._frame()).lease_batch.leases)
        return leases

    async def acks(self, wanted: int) -> dict[int, rt.ReportAck]:
        acks: dict[int, rt.ReportAck] = {}
        while len(acks) < wanted:
            acks |= {ack.report_id: ack for ack in (await self._frame()).ack_batch.acks}
        return acks


def _result(report_id: int, lease: types_pb2.Lease, token: str = "") -> rt.PollReport:
    output = echo_output(lease)
    request = rt.SubmitResultRequest(
        job_id=lease.job_id,
        attempt_no=lease.attempt_no,
        runtime_instance_id="rt-frames",
        output_hash=output_hash(output),
        output_json=json.dumps(output),
        lease_token=token or lease.lease_token,
    )
    return rt.PollReport(report_id=report_id, result=request)


async def test_leases_and_acks_come_in_frames_and_each_report_keeps_its_own_answer(
    scheduler: RunningScheduler,
) -> None:
    jobs = JobClient(scheduler.channel)
    for index in range(5):
        await jobs.create(snapshot={"i": index})
    stream = RawStream(scheduler, slots=3)
    try:
        first = await stream.leases(3)
        # Credits count leases: three slots, three leases, and the other two jobs stay queued.
        assert await count(scheduler.app.engine, JOBS, lifecycleStatus="running") == 3
        stream.send(rt.PollRequest(credit=rt.PollCredit(slots=2)))
        leases = first + await stream.leases(2)
        assert len({lease.job_id for lease in leases}) == 5
        assert set(stream.frames) == {"lease_batch"}

        stolen = leases[4]
        reports = [_result(i + 1, lease) for i, lease in enumerate(leases[:4])]
        reports += [_result(5, stolen, token="not-the-token"), _result(6, leases[0])]
        stream.send(rt.PollRequest(report_batch=rt.ReportBatch(reports=reports)))
        acks = await stream.acks(6)

        assert set(stream.frames[-1:]) == {"ack_batch"}
        assert all(acks[i].status.code == 0 for i in (1, 2, 3, 4, 6))
        assert not acks[1].result.duplicate
        # The same result twice in one frame: the second is the first's duplicate.
        assert acks[6].result.duplicate
        assert acks[6].result.result_idempotency_key == acks[1].result.result_idempotency_key
        # A wrong token fails alone, exactly as its unary call would.
        lost = error_from_status(acks[5].status)
        assert lost.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert error_reason(lost) == "LEASE_LOST"
        engine = scheduler.app.engine
        assert await count(engine, JOBS, lifecycleStatus=LifecycleStatus.SUCCEEDED.value) == 4
        assert await count(engine, JOBS, id=stolen.job_id, lifecycleStatus="running") == 1
    finally:
        stream.call.cancel()


async def test_batched_and_single_message_runtimes_drain_side_by_side(
    scheduler: RunningScheduler,
) -> None:
    jobs = JobClient(scheduler.channel)
    for index in range(40):
        await jobs.create(snapshot={"i": index})
    runtimes = [
        ClientRuntime(scheduler.channel, "rt-batched", slots=8, batch_frames=True),
        ClientRuntime(scheduler.channel, "rt-single", slots=8),
    ]
    done = asyncio.Event()
    finished: list[str] = []

    async def finish(runtime: ClientRuntime, lease: types_pb2.Lease) -> None:
        ack = await runtime.submit_on_stream(lease, echo_output(lease))
        assert ack.status.code == 0, ack.status
        finished.append(lease.job_id)
        if len(finished) == 40:
            done.set()

    async with working(runtimes, finish):
        await asyncio.wait_for(done.wait(), WAIT_S)

    assert len(set(finished)) == 40
    succeeded = LifecycleStatus.SUCCEEDED.value
    assert await count(scheduler.app.engine, JOBS, lifecycleStatus=succeeded) == 40

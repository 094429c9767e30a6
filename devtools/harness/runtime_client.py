"""A test runtime built only on the generated gRPC client: what any runtime implementation sees."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import duration_pb2, json_format

from devtools.harness.tokens import RUNTIME_TOKEN, SERVICE_TOKEN, bearer
from shared.canonical_json import output_hash
from shared.gen.aijob.v1 import (
    job_service_pb2,
    job_service_pb2_grpc,
    runtime_service_pb2_grpc,
    types_pb2,
)
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.poll_frames import end_requests, outgoing_frames, outgoing_messages

WAIT_S = 30.0


@dataclass
class ClientRuntime:
    """One runtime instance: a Poll stream plus the unary calls, all over the generated stubs."""

    channel: grpc.aio.Channel
    instance_id: str
    job_types: list[str] = field(default_factory=lambda: ["synthetic_echo"])
    slots: int = 4
    leases: asyncio.Queue[types_pb2.Lease] = field(default_factory=asyncio.Queue)
    cancels: asyncio.Queue[rt.CancelNotice] = field(default_factory=asyncio.Queue)
    received: list[tuple[str, int]] = field(default_factory=list)
    #: job id -> wall-clock time its latest lease came off the stream
    arrived: dict[str, float] = field(default_factory=dict)
    token: str = RUNTIME_TOKEN
    #: Subscribe with batch_frames and send what is ready together in one frame.
    batch_frames: bool = False
    frame_window_s: float = 0.001

    def __post_init__(self) -> None:
        self.stub = runtime_service_pb2_grpc.RuntimeServiceStub(self.channel)
        self.metadata = bearer(self.token)
        self._sending: asyncio.Queue[rt.PollRequest] = asyncio.Queue()
        self._acks: dict[int, asyncio.Future[rt.ReportAck]] = {}
        self._next_report = 0
        self._call: Any = None
        self._reader: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self._call = self.stub.Poll(self._requests(), metadata=self.metadata)
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _requests(self) -> AsyncIterator[rt.PollRequest]:
        yield rt.PollRequest(
            subscribe=rt.PollSubscribe(
                runtime_instance_id=self.instance_id,
                job_types=self.job_types,
                slots=self.slots,
                batch_frames=self.batch_frames,
            )
        )
        if self.batch_frames:
            async for frame in outgoing_frames(self._sending, window_s=self.frame_window_s):
                yield frame
        else:
            async for message in outgoing_messages(self._sending):
                yield message

    async def _read(self) -> None:
        async for message in self._call:
            match message.WhichOneof("kind"):
                case "lease":
                    self._leased(message.lease)
                case "lease_batch":
                    for lease in message.lease_batch.leases:
                        self._leased(lease)
                case "ack":
                    self._acks.pop(message.ack.report_id).set_result(message.ack)
                case "ack_batch":
                    for ack in message.ack_batch.acks:
                        self._acks.pop(ack.report_id).set_result(ack)
                case _:
                    self.cancels.put_nowait(message.cancel)

    def _leased(self, lease: types_pb2.Lease) -> None:
        self.arrived[lease.job_id] = time.time()
        self.received.append((lease.job_id, lease.attempt_no))
        self.leases.put_nowait(lease)

    def credit(self, slots: int = 1) -> None:
        self._sending.put_nowait(rt.PollRequest(credit=rt.PollCredit(slots=slots)))

    def keepalive(self) -> None:
        self._sending.put_nowait(rt.PollRequest(keepalive=rt.PollKeepalive()))

    async def report(self, report: rt.PollReport, within_s: float = WAIT_S) -> rt.ReportAck:
        """Send ``report`` on the stream (its report_id is set here) and wait for its ack."""
        self._next_report += 1
        report.report_id = self._next_report
        ack: asyncio.Future[rt.ReportAck] = asyncio.get_running_loop().create_future()
        self._acks[report.report_id] = ack
        self._sending.put_nowait(rt.PollRequest(report=report))
        return await asyncio.wait_for(ack, within_s)

    def result_request(self, lease: types_pb2.Lease, output: Any) -> rt.SubmitResultRequest:
        return rt.SubmitResultRequest(
            job_id=lease.job_id,
            attempt_no=lease.attempt_no,
            runtime_instance_id=self.instance_id,
            output_hash=output_hash(output),
            output_json=json.dumps(output),
            usage=types_pb2.Usage(
                model_name="scripted", prompt_tokens=10, completion_tokens=5, latency_ms=3
            ),
            lease_token=lease.lease_token,
        )

    async def submit_on_stream(self, lease: types_pb2.Lease, output: Any) -> rt.ReportAck:
        return await self.report(rt.PollReport(result=self.result_request(lease, output)))

    def _chunk_report(self, lease: types_pb2.Lease, offset: int, text: str) -> rt.PollReport:
        chunk = types_pb2.OutputChunk(attempt_no=lease.attempt_no, offset=offset, text=text)
        return rt.PollReport(
            output_chunk=rt.OutputChunkReport(
                job_id=lease.job_id,
                runtime_instance_id=self.instance_id,
                lease_token=lease.lease_token,
                chunk=chunk,
            )
        )

    async def send_chunk(self, lease: types_pb2.Lease, offset: int, text: str) -> rt.ReportAck:
        """An output chunk on the stream, and its ack."""
        return await self.report(self._chunk_report(lease, offset, text))

    async def submit_streamed(self, lease: types_pb2.Lease, output: Any) -> rt.ReportAck:
        """The output's text as one chunk and the result, sent together (one frame)."""
        text = json.dumps(output)
        chunk, result = await asyncio.gather(
            self.send_chunk(lease, 0, text), self.submit_on_stream(lease, output)
        )
        assert chunk.status.code == 0, chunk.status
        return result

    async def next_lease(self, within_s: float = WAIT_S) -> types_pb2.Lease:
        return await asyncio.wait_for(self.leases.get(), within_s)

    async def stream_end(self, within_s: float = WAIT_S) -> None:
        """Wait for the Poll stream to end; raises the status it ended with."""
        assert self._reader is not None, "connect() first"
        await asyncio.wait_for(asyncio.shield(self._reader), within_s)

    async def next_cancel(self, within_s: float = WAIT_S) -> rt.CancelNotice:
        return await asyncio.wait_for(self.cancels.get(), within_s)

    async def close(self) -> None:
        if self._call is not None:
            if self._call.done():  # its cancel() would not stop the pump; the end does
                end_requests(self._sending)
            self._call.cancel()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)

    async def heartbeat(
        self, lease: types_pb2.Lease, progress: int = 50, *, first_token: bool = False
    ) -> rt.HeartbeatResponse:
        return await self.stub.Heartbeat(
            rt.HeartbeatRequest(
                job_id=lease.job_id,
                attempt_no=lease.attempt_no,
                runtime_instance_id=self.instance_id,
                progress=progress,
                lease_token=lease.lease_token,
                first_token=first_token,
            ),
            metadata=self.metadata,
            timeout=WAIT_S,
        )

    async def submit(self, lease: types_pb2.Lease, output: Any) -> rt.SubmitResultResponse:
        return await self.stub.SubmitResult(
            self.result_request(lease, output), metadata=self.metadata, timeout=WAIT_S
        )

    async def fail(
        self,
        lease: types_pb2.Lease,
        code: str,
        *,
        retryable: bool,
        retry_after_ms: int = 0,
    ) -> rt.SubmitFailureResponse:
        retry_after = duration_pb2.Duration()
        retry_after.FromMilliseconds(retry_after_ms)
        return await self.stub.SubmitFailure(
            rt.SubmitFailureRequest(
                job_id=lease.job_id,
                attempt_no=lease.attempt_no,
                runtime_instance_id=self.instance_id,
                error_code=code,
                retryable=retryable,
                public_error_message="failed",
                internal_error_message="details for operators",
                retry_after=retry_after,
                lease_token=lease.lease_token,
            ),
            metadata=self.metadata,
            timeout=WAIT_S,
        )


#: What a worked lease becomes: its report (the slot is credited back afterwards).
Finish = Callable[[ClientRuntime, types_pb2.Lease], Awaitable[None]]


@asynccontextmanager
async def working(runtimes: Sequence[ClientRuntime], finish: Finish) -> AsyncIterator[None]:
    """Each of ``runtimes`` connected, every lease it receives run by ``finish`` as a task of its
    own (as a runtime with free slots runs it), the slot credited back once it is done. On exit
    the loops and the leases still running are cancelled and the runtimes closed."""
    running: set[asyncio.Task[None]] = set()

    async def run(runtime: ClientRuntime, lease: types_pb2.Lease) -> None:
        await finish(runtime, lease)
        runtime.credit()

    async def work(runtime: ClientRuntime) -> None:
        await runtime.connect()
        while True:
            task = asyncio.ensure_future(run(runtime, await runtime.leases.get()))
            running.add(task)
            task.add_done_callback(running.discard)

    workers = [asyncio.ensure_future(work(runtime)) for runtime in runtimes]
    try:
        yield
    finally:
        for task in [*workers, *running]:
            task.cancel()
        await asyncio.gather(*workers, *running, return_exceptions=True)
        for runtime in runtimes:
            await runtime.close()


def echo_output(lease: types_pb2.Lease) -> dict[str, Any]:
    return {"echo": json_format.MessageToDict(lease.snapshot)}


class JobClient:
    """The internal-service side: creates, reads and cancels jobs for one user."""

    def __init__(
        self, channel: grpc.aio.Channel, user_id: str = "user-1", token: str = SERVICE_TOKEN
    ) -> None:
        self.stub = job_service_pb2_grpc.JobServiceStub(channel)
        self.metadata = (("x-user-id", user_id), *bearer(token))

    async def create(
        self,
        job_type: str = "synthetic_echo",
        snapshot: dict[str, Any] | None = None,
        **fields: Any,
    ) -> types_pb2.Job:
        request = job_service_pb2.CreateJobRequest(job_type=job_type, **fields)
        json_format.ParseDict(snapshot or {"text": "hello"}, request.snapshot)
        reply = await self.stub.CreateJob(request, metadata=self.metadata, timeout=WAIT_S)
        return reply.job

    def stream_output(self, job_id: str, after_offset: int = 0) -> Any:
        """The job's StreamOutput call (iterate it for the chunks)."""
        return self.stub.StreamOutput(
            job_service_pb2.StreamOutputRequest(job_id=job_id, after_offset=after_offset),
            metadata=self.metadata,
        )

    async def get(self, job_id: str) -> types_pb2.Job:
        return await self.stub.GetJob(
            job_service_pb2.GetJobRequest(job_id=job_id), metadata=self.metadata, timeout=WAIT_S
        )

    async def cancel(self, job_id: str) -> job_service_pb2.CancelJobResponse:
        return await self.stub.CancelJob(
            job_service_pb2.CancelJobRequest(job_id=job_id), metadata=self.metadata, timeout=WAIT_S
        )

"""The runtime protocol's messages to domain values and back (the Poll stream and the unary
calls share them, so a report's ack is exactly the unary call's answer)."""

from __future__ import annotations

from google.rpc import status_pb2

from scheduler_service.api import convert
from scheduler_service.api.status import status_of
from scheduler_service.core.records import HeartbeatOutcome
from scheduler_service.services.dispatch import Ack, CancelNotice
from scheduler_service.services.reports import (
    ChunkReport,
    ChunkStored,
    FailureOutcome,
    FailureReport,
    HeartbeatReport,
    Report,
    ResultSubmission,
    SubmitOutcome,
)
from scheduler_service.services.session import (
    AckFrame,
    Credit,
    Incoming,
    Keepalive,
    LeaseFrame,
    Outgoing,
    ReportFrame,
    ReportMessage,
    Subscribe,
    UnknownMessage,
)
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.poll_frames import chunked

__all__ = [
    "chunk_report",
    "failure_report",
    "failure_response",
    "heartbeat_report",
    "heartbeat_response",
    "poll_message",
    "poll_responses",
    "result_submission",
    "submit_response",
]


def result_submission(request: rt.SubmitResultRequest) -> ResultSubmission:
    return ResultSubmission(
        job_id=request.job_id,
        attempt_no=request.attempt_no,
        runtime_instance_id=request.runtime_instance_id,
        output_hash=request.output_hash,
        output_json=request.output_json,
        usage=convert.usage(request.usage, request.HasField("usage")),
        lease_token=request.lease_token,
    )


def failure_report(request: rt.SubmitFailureRequest) -> FailureReport:
    return FailureReport(
        job_id=request.job_id,
        attempt_no=request.attempt_no,
        runtime_instance_id=request.runtime_instance_id,
        error_code=request.error_code,
        retryable=request.retryable,
        public_message=request.public_error_message,
        internal_message=request.internal_error_message,
        retry_after_ms=request.retry_after.ToMilliseconds(),
        usage=convert.usage(request.usage, request.HasField("usage")),
        lease_token=request.lease_token,
    )


def heartbeat_report(request: rt.HeartbeatRequest) -> HeartbeatReport:
    return HeartbeatReport(
        request.job_id,
        request.attempt_no,
        request.runtime_instance_id,
        request.progress,
        request.lease_token,
        request.first_token,
    )


def chunk_report(request: rt.OutputChunkReport) -> ChunkReport:
    return ChunkReport(
        request.job_id,
        request.chunk.attempt_no,
        request.runtime_instance_id,
        request.chunk.offset,
        request.chunk.text,
        request.lease_token,
    )


def submit_response(outcome: SubmitOutcome) -> rt.SubmitResultResponse:
    return rt.SubmitResultResponse(
        result_idempotency_key=outcome.result_idempotency_key, duplicate=outcome.duplicate
    )


def failure_response(outcome: FailureOutcome) -> rt.SubmitFailureResponse:
    return rt.SubmitFailureResponse(
        lifecycle_status=outcome.status.value,
        next_attempt_at=convert.timestamp(outcome.next_attempt_at),
    )


def heartbeat_response(outcome: HeartbeatOutcome) -> rt.HeartbeatResponse:
    return rt.HeartbeatResponse(
        lock_until=convert.timestamp(outcome.lock_until),
        cancel_requested=outcome.cancel_requested,
    )


def poll_message(request: rt.PollRequest) -> Incoming:
    match request.WhichOneof("kind"):
        case "subscribe":
            return _subscribe(request.subscribe)
        case "credit":
            return Credit(request.credit.slots)
        case "report":
            return _report_message(request.report) or UnknownMessage("report")
        case "report_batch":
            return _report_frame(request.report_batch)
        case "keepalive":
            return Keepalive()
        case kind:
            return UnknownMessage(str(kind))


def _subscribe(sub: rt.PollSubscribe) -> Subscribe:
    held = tuple((ref.job_id, ref.attempt_no) for ref in sub.held)
    return Subscribe(
        sub.runtime_instance_id,
        tuple(sub.job_types),
        sub.slots,
        held,
        batch_frames=sub.batch_frames,
    )


def _report_frame(batch: rt.ReportBatch) -> ReportFrame | UnknownMessage:
    messages = [_report_message(report) for report in batch.reports]
    if any(message is None for message in messages):
        return UnknownMessage("report")
    return ReportFrame(tuple(m for m in messages if m is not None))


def _report_message(message: rt.PollReport) -> ReportMessage | None:
    report = _report(message)
    return None if report is None else ReportMessage(message.report_id, report)


def _report(message: rt.PollReport) -> Report | None:
    match message.WhichOneof("report"):
        case "result":
            return result_submission(message.result)
        case "failure":
            return failure_report(message.failure)
        case "heartbeat":
            return heartbeat_report(message.heartbeat)
        case "output_chunk":
            return chunk_report(message.output_chunk)
    return None


def poll_responses(message: Outgoing) -> list[rt.PollResponse]:
    """One message, or a frame as messages of at most FRAME_BYTES each (most often one)."""
    match message:
        case CancelNotice():
            cancel = rt.CancelNotice(job_id=message.job_id, attempt_no=message.attempt_no)
            return [rt.PollResponse(cancel=cancel)]
        case Ack():
            return [rt.PollResponse(ack=_ack(message))]
        case LeaseFrame():
            leases = chunked(convert.lease(lease) for lease in message.leases)
            return [rt.PollResponse(lease_batch=rt.LeaseBatch(leases=run)) for run in leases]
        case AckFrame():
            acks = chunked(_ack(ack) for ack in message.acks)
            return [rt.PollResponse(ack_batch=rt.AckBatch(acks=run)) for run in acks]
    return [rt.PollResponse(lease=convert.lease(message))]


def _ack(ack: Ack) -> rt.ReportAck:
    answer = ack.answer
    match answer:
        case SubmitOutcome():
            return rt.ReportAck(
                report_id=ack.report_id, status=status_pb2.Status(), result=submit_response(answer)
            )
        case FailureOutcome():
            return rt.ReportAck(
                report_id=ack.report_id,
                status=status_pb2.Status(),
                failure=failure_response(answer),
            )
        case HeartbeatOutcome():
            return rt.ReportAck(
                report_id=ack.report_id,
                status=status_pb2.Status(),
                heartbeat=heartbeat_response(answer),
            )
        case ChunkStored():
            return rt.ReportAck(report_id=ack.report_id, status=status_pb2.Status())
    _code, status = status_of(answer, "Poll.report")
    return rt.ReportAck(report_id=ack.report_id, status=status)

"""The runtime's side of the gRPC protocol: the stubs, bearer token and error translation."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

import grpc
from google.protobuf import duration_pb2, json_format

from runtime_service.failures import JobFailure
from runtime_service.output_chunks import ChunkRefused
from runtime_service.pipeline import CallUsage, HeartbeatReply, LeaseInput, LeaseLost
from runtime_service.rate_limits import RateLimitHeaders
from runtime_service.stream_reports import StreamBroken, StreamReports
from shared.canonical_json import output_hash
from shared.error_codes import ErrorCode
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.gen.aijob.v1 import runtime_service_pb2_grpc, types_pb2
from shared.job_types.reasoning import OFF
from shared.status_details import error_from_status, error_reason, status_reason

__all__ = ["GrpcSchedulerClient", "lease_input"]

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 30.0
#: How long a result or failure report keeps being retried while the scheduler is unreachable
#: (a restart, a database outage). Safe to repeat: a result is keyed jobId:attempt:hash, and a
#: report that did commit answers LEASE_LOST the second time.
REPORT_RETRY_S = 60.0
_TRANSIENT = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


#: The lease's effort as the provider is told it; unset (a scheduler that predates it): off.
_EFFORTS = {
    types_pb2.REASONING_EFFORT_LOW: "low",
    types_pb2.REASONING_EFFORT_HIGH: "high",
    types_pb2.REASONING_EFFORT_MAX: "max",
}


def lease_input(lease: types_pb2.Lease) -> LeaseInput:
    return LeaseInput(
        job_id=lease.job_id,
        job_type=lease.job_type,
        attempt_no=lease.attempt_no,
        timeout_ms=lease.timeout_ms,
        snapshot=json_format.MessageToDict(lease.snapshot),
        params=json_format.MessageToDict(lease.params),
        prompt_key=lease.prompt_key,
        prompt_version=lease.prompt_version,
        credential_mode=lease.credential_mode,
        model_name=lease.model_name,
        output_schema_version=lease.output_schema_version or "v1",
        lease_token=lease.lease_token,
        max_output_tokens=lease.max_output_tokens,
        traceparent=lease.traceparent,
        provider_user_id=lease.provider_user_id,
        resume_output=lease.resume_output,
        stream_output=lease.stream_output,
        reasoning_effort=_EFFORTS.get(lease.reasoning_effort, OFF),
        tell_first_token=lease.tell_first_token,
        model_provider=lease.model_provider,
        model_tier=lease.model_tier,
    )


def _usage(usage: CallUsage | None) -> types_pb2.Usage | None:
    if usage is None:
        return None
    message = types_pb2.Usage(
        model_name=usage.model_name,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        latency_ms=usage.latency_ms,
        cost_micros=usage.cost_micros,
        cached_prompt_tokens=usage.cached_prompt_tokens,
        reasoning_tokens=usage.reasoning_tokens,
    )
    if usage.time_to_first_token_ms is not None:
        message.time_to_first_token_ms = usage.time_to_first_token_ms
    if usage.rate_limits is not None:
        message.rate_limits.CopyFrom(rate_limits_message(usage.rate_limits))
    return message


def rate_limits_message(seen: RateLimitHeaders) -> types_pb2.ProviderRateLimits:
    message = types_pb2.ProviderRateLimits()
    for field in ("limit_requests", "remaining_requests", "limit_tokens", "remaining_tokens"):
        value = getattr(seen, field)
        if value is not None:
            setattr(message, field, value)
    if seen.reset_requests_ms is not None:
        message.reset_requests.FromMilliseconds(seen.reset_requests_ms)
    if seen.reset_tokens_ms is not None:
        message.reset_tokens.FromMilliseconds(seen.reset_tokens_ms)
    return message


class GrpcSchedulerClient:
    def __init__(
        self,
        channel: grpc.aio.Channel,
        token: str,
        instance_id: str,
        stream: StreamReports | None = None,
    ) -> None:
        self.stub = runtime_service_pb2_grpc.RuntimeServiceStub(channel)
        self.metadata = (("authorization", f"Bearer {token}"),)
        self.instance_id = instance_id
        #: The Poll stream, when one is up: reports go on it and fall back to unary calls.
        self.stream = stream or StreamReports()

    async def _unary(self, method: Any, request: Any, kind: str = "") -> Any:
        try:
            if kind:
                with contextlib.suppress(StreamBroken):
                    return await self._on_stream(kind, request)
            return await method(request, metadata=self.metadata, timeout=CALL_TIMEOUT_S)
        except grpc.aio.AioRpcError as error:
            if error_reason(error) in {"LEASE_LOST", "JOB_ALREADY_TERMINAL", "PERMISSION_DENIED"}:
                raise LeaseLost(error_reason(error)) from None
            raise

    async def _on_stream(self, kind: str, request: Any) -> Any:
        """The report on the Poll stream; its ack's status raised as the unary call would."""
        ack = await self.stream.send(rt.PollReport(**{kind: request}), CALL_TIMEOUT_S)
        if ack.status.code != 0:
            raise error_from_status(ack.status)
        return getattr(ack, kind)

    async def _report(self, method: Any, request: Any, kind: str) -> Any:
        """``_unary`` retried with backoff through transient outages, for up to REPORT_RETRY_S."""
        deadline = asyncio.get_running_loop().time() + REPORT_RETRY_S
        backoff = 0.2
        while True:
            try:
                return await self._unary(method, request, kind)
            except grpc.aio.AioRpcError as error:
                now = asyncio.get_running_loop().time()
                if error.code() not in _TRANSIENT or now + backoff > deadline:
                    raise
                log.warning(
                    "scheduler unreachable; retrying the report",
                    extra={"action": "report_retry", "code": error.code().name},
                )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    async def heartbeat(
        self, lease: LeaseInput, progress: int, *, first_token: bool = False
    ) -> HeartbeatReply:
        reply = await self._unary(
            self.stub.Heartbeat,
            rt.HeartbeatRequest(
                job_id=lease.job_id,
                attempt_no=lease.attempt_no,
                runtime_instance_id=self.instance_id,
                progress=progress,
                lease_token=lease.lease_token,
                first_token=first_token,
            ),
            "heartbeat",
        )
        return HeartbeatReply(cancel_requested=reply.cancel_requested)

    async def submit_result(self, lease: LeaseInput, output: Any, usage: CallUsage | None) -> None:
        await self._report(
            self.stub.SubmitResult,
            rt.SubmitResultRequest(
                job_id=lease.job_id,
                attempt_no=lease.attempt_no,
                runtime_instance_id=self.instance_id,
                output_hash=output_hash(output),
                output_json=json.dumps(output, ensure_ascii=False),
                usage=_usage(usage),
                lease_token=lease.lease_token,
            ),
            "result",
        )

    async def submit_failure(
        self, lease: LeaseInput, failure: JobFailure, usage: CallUsage | None
    ) -> None:
        retry_after = duration_pb2.Duration()
        retry_after.FromMilliseconds(failure.retry_after_ms)
        await self._report(
            self.stub.SubmitFailure,
            rt.SubmitFailureRequest(
                job_id=lease.job_id,
                attempt_no=lease.attempt_no,
                runtime_instance_id=self.instance_id,
                error_code=failure.code.value,
                retryable=failure.retryable,
                public_error_message=failure.public_message,
                internal_error_message=failure.internal_message,
                retry_after=retry_after,
                usage=_usage(usage),
                lease_token=lease.lease_token,
            ),
            "failure",
        )

    async def send_chunk(self, lease: LeaseInput, offset: int, text: str) -> None:
        """On the Poll stream only (no unary call exists): StreamBroken while there is none."""
        report = rt.OutputChunkReport(
            job_id=lease.job_id,
            runtime_instance_id=self.instance_id,
            lease_token=lease.lease_token,
            chunk=types_pb2.OutputChunk(attempt_no=lease.attempt_no, offset=offset, text=text),
        )
        ack = await self.stream.send(rt.PollReport(output_chunk=report), CALL_TIMEOUT_S)
        if ack.status.code == grpc.StatusCode.UNAVAILABLE.value[0]:
            raise StreamBroken()  # the database was away: the text goes with the next chunk
        if ack.status.code != 0:
            raise ChunkRefused(status_reason(ack.status))

    async def resolve_credential(self, lease: LeaseInput) -> str:
        try:
            reply = await self._unary(
                self.stub.ResolveCredential,
                rt.ResolveCredentialRequest(
                    job_id=lease.job_id,
                    attempt_no=lease.attempt_no,
                    runtime_instance_id=self.instance_id,
                    lease_token=lease.lease_token,
                ),
            )
        except grpc.aio.AioRpcError as error:
            reason = error_reason(error)
            if reason == ErrorCode.INVALID_CREDENTIAL:
                # Deleted by its user, or never theirs: no model call is made.
                raise JobFailure(
                    ErrorCode.INVALID_CREDENTIAL,
                    "The user's model key was deleted or does not exist.",
                    reason,
                ) from None
            raise JobFailure(
                ErrorCode.CREDENTIAL_NOT_FOUND,
                "The user's model key is not available.",
                reason,
            ) from None
        return str(reply.api_key)

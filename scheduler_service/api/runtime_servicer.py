"""The runtime protocol's gRPC servicer: Poll, Lock, Heartbeat, SubmitResult, SubmitFailure and
ResolveCredential, translated to the protocol's calls and back."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc

from scheduler_service.api import convert, runtime_convert
from scheduler_service.services.runtime_pieces import RuntimePieces
from scheduler_service.services.session import Incoming, PollSessions
from scheduler_service.sql.credentials import CredentialStore
from shared.gen.aijob.v1 import runtime_service_pb2 as runtime_pb
from shared.gen.aijob.v1 import runtime_service_pb2_grpc as runtime_grpc
from shared.gen.aijob.v1 import types_pb2 as types_pb

__all__ = ["RuntimeServicer"]

Context = grpc.aio.ServicerContext[Any, Any]


class RuntimeServicer(runtime_grpc.RuntimeServiceServicer):
    def __init__(
        self,
        polls: PollSessions,
        runtime: RuntimePieces,
        credentials: CredentialStore,
    ) -> None:
        self._polls = polls
        self._runtime = runtime
        self._credentials = credentials

    async def Poll(
        self, request_iterator: AsyncIterator[runtime_pb.PollRequest], context: Context
    ) -> AsyncIterator[runtime_pb.PollResponse]:
        incoming = _poll_messages(request_iterator)
        async with contextlib.aclosing(self._polls.serve(incoming)) as outgoing:
            async for message in outgoing:
                for response in runtime_convert.poll_responses(message):
                    yield response

    async def Lock(self, request: runtime_pb.LockRequest, context: Context) -> types_pb.Lease:
        payload = await self._runtime.leasing.lock(request.job_id, request.runtime_instance_id)
        return convert.lease(payload)

    async def Heartbeat(
        self, request: runtime_pb.HeartbeatRequest, context: Context
    ) -> runtime_pb.HeartbeatResponse:
        beat = await self._runtime.reports.heartbeat(runtime_convert.heartbeat_report(request))
        return runtime_convert.heartbeat_response(beat)

    async def SubmitResult(
        self, request: runtime_pb.SubmitResultRequest, context: Context
    ) -> runtime_pb.SubmitResultResponse:
        submission = runtime_convert.result_submission(request)
        outcome = await self._runtime.reports.submit_result(submission)
        return runtime_convert.submit_response(outcome)

    async def SubmitFailure(
        self, request: runtime_pb.SubmitFailureRequest, context: Context
    ) -> runtime_pb.SubmitFailureResponse:
        report = runtime_convert.failure_report(request)
        return runtime_convert.failure_response(await self._runtime.reports.submit_failure(report))

    async def ResolveCredential(
        self, request: runtime_pb.ResolveCredentialRequest, context: Context
    ) -> runtime_pb.ResolveCredentialResponse:
        api_key, provider = await self._runtime.key_access.resolve_credential(
            request.job_id,
            request.attempt_no,
            request.runtime_instance_id,
            request.lease_token,
            self._credentials,
        )
        return runtime_pb.ResolveCredentialResponse(api_key=api_key, provider=provider)


async def _poll_messages(
    requests: AsyncIterator[runtime_pb.PollRequest],
) -> AsyncIterator[Incoming]:
    # A generator function, not an expression: nothing touches the stream until it is read.
    async for request in requests:
        yield runtime_convert.poll_message(request)

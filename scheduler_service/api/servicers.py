"""Servicers for the three services. Their RPC bodies arrive with the runtime-protocol and job-API
issues; until then every RPC answers UNIMPLEMENTED with a clear message."""

from __future__ import annotations

from typing import Any, NoReturn

import grpc

from shared.gen.aijob.v1 import admin_service_pb2_grpc, job_service_pb2_grpc, runtime_service_pb2_grpc


async def _unimplemented(context: grpc.aio.ServicerContext[Any, Any]) -> NoReturn:
    await context.abort(grpc.StatusCode.UNIMPLEMENTED, "not implemented yet")


class JobServicer(job_service_pb2_grpc.JobServiceServicer):
    async def CreateJob(self, request: Any, context: Any) -> Any:
        await _unimplemented(context)

    async def GetJob(self, request: Any, context: Any) -> Any:
        await _unimplemented(context)

    async def CancelJob(self, request: Any, context: Any) -> Any:
        await _unimplemented(context)

    async def WatchJob(self, request: Any, context: Any) -> Any:
        await _unimplemented(context)

    async def ListJobs(self, request: Any, context: Any) -> Any:
        await _unimplemented(context)

    async def SubscribeEvents(self, request: Any, context: Any) -> Any:
        await _unimplemented(context)


class AdminServicer(admin_service_pb2_grpc.AdminServiceServicer):
    async def ListJobs(self, request: Any, context: Any) -> Any:
        await _unimplemented(context)

    async def GetJob(self, request: Any, context: Any) -> Any:
        await _unimplemented(context)

    async def RetryJob(self, request: Any, context: Any) -> Any:
        await _unimplemented(context)

    async def GetQueueStats(self, request: Any, context: Any) -> Any:
        await _unimplemented(context)

    async def CancelUserJobs(self, request: Any, context: Any) -> Any:
        await _unimplemented(context)

    async def RedriveDeadEvents(self, request: Any, context: Any) -> Any:
        await _unimplemented(context)


class RuntimeServicer(runtime_service_pb2_grpc.RuntimeServiceServicer):
    async def Poll(self, request_iterator: Any, context: Any) -> Any:
        await _unimplemented(context)

    async def Lock(self, request: Any, context: Any) -> Any:
        await _unimplemented(context)

    async def Heartbeat(self, request: Any, context: Any) -> Any:
        await _unimplemented(context)

    async def SubmitResult(self, request: Any, context: Any) -> Any:
        await _unimplemented(context)

    async def SubmitFailure(self, request: Any, context: Any) -> Any:
        await _unimplemented(context)

    async def ResolveCredential(self, request: Any, context: Any) -> Any:
        await _unimplemented(context)

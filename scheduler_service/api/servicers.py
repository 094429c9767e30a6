"""Servicers for the three services.

Their RPC bodies arrive with the runtime-protocol and job-API issues; until then every RPC answers
UNIMPLEMENTED with a clear message, so clients and grpcurl already see the whole contract.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, NoReturn

import grpc

from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc as admin_grpc
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import job_service_pb2_grpc as job_grpc
from shared.gen.aijob.v1 import runtime_service_pb2 as runtime_pb
from shared.gen.aijob.v1 import runtime_service_pb2_grpc as runtime_grpc
from shared.gen.aijob.v1 import types_pb2 as types_pb

Context = grpc.aio.ServicerContext[Any, Any]


async def _unimplemented(context: Context) -> NoReturn:
    await context.abort(grpc.StatusCode.UNIMPLEMENTED, "not implemented yet")


class JobServicer(job_grpc.JobServiceServicer):
    async def CreateJob(
        self, request: job_pb.CreateJobRequest, context: Context
    ) -> job_pb.CreateJobResponse:
        await _unimplemented(context)

    async def GetJob(self, request: job_pb.GetJobRequest, context: Context) -> types_pb.Job:
        await _unimplemented(context)

    async def CancelJob(
        self, request: job_pb.CancelJobRequest, context: Context
    ) -> job_pb.CancelJobResponse:
        await _unimplemented(context)

    async def WatchJob(
        self, request: job_pb.WatchJobRequest, context: Context
    ) -> AsyncIterator[types_pb.Job]:
        await _unimplemented(context)
        yield types_pb.Job()

    async def ListJobs(
        self, request: job_pb.ListJobsRequest, context: Context
    ) -> job_pb.ListJobsResponse:
        await _unimplemented(context)

    async def SubscribeEvents(
        self, request: job_pb.SubscribeEventsRequest, context: Context
    ) -> AsyncIterator[types_pb.JobEvent]:
        await _unimplemented(context)
        yield types_pb.JobEvent()


class AdminServicer(admin_grpc.AdminServiceServicer):
    async def ListJobs(
        self, request: admin_pb.AdminListJobsRequest, context: Context
    ) -> job_pb.ListJobsResponse:
        await _unimplemented(context)

    async def GetJob(self, request: job_pb.GetJobRequest, context: Context) -> types_pb.Job:
        await _unimplemented(context)

    async def RetryJob(self, request: admin_pb.RetryJobRequest, context: Context) -> types_pb.Job:
        await _unimplemented(context)

    async def GetQueueStats(
        self, request: admin_pb.GetQueueStatsRequest, context: Context
    ) -> admin_pb.QueueStats:
        await _unimplemented(context)

    async def CancelUserJobs(
        self, request: admin_pb.CancelUserJobsRequest, context: Context
    ) -> admin_pb.CancelUserJobsResponse:
        await _unimplemented(context)

    async def RedriveDeadEvents(
        self, request: admin_pb.RedriveDeadEventsRequest, context: Context
    ) -> admin_pb.RedriveDeadEventsResponse:
        await _unimplemented(context)


class RuntimeServicer(runtime_grpc.RuntimeServiceServicer):
    async def Poll(
        self, request_iterator: AsyncIterator[runtime_pb.PollRequest], context: Context
    ) -> AsyncIterator[runtime_pb.PollResponse]:
        await _unimplemented(context)
        yield runtime_pb.PollResponse()

    async def Lock(self, request: runtime_pb.LockRequest, context: Context) -> types_pb.Lease:
        await _unimplemented(context)

    async def Heartbeat(
        self, request: runtime_pb.HeartbeatRequest, context: Context
    ) -> runtime_pb.HeartbeatResponse:
        await _unimplemented(context)

    async def SubmitResult(
        self, request: runtime_pb.SubmitResultRequest, context: Context
    ) -> runtime_pb.SubmitResultResponse:
        await _unimplemented(context)

    async def SubmitFailure(
        self, request: runtime_pb.SubmitFailureRequest, context: Context
    ) -> runtime_pb.SubmitFailureResponse:
        await _unimplemented(context)

    async def ResolveCredential(
        self, request: runtime_pb.ResolveCredentialRequest, context: Context
    ) -> runtime_pb.ResolveCredentialResponse:
        await _unimplemented(context)

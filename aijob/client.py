"""The engine's public Python client: the job API and the admin API, async and blocking.

    from aijob.client import JobsClient

    async with JobsClient("127.0.0.1:50051", token="...", user_id="u-1") as jobs:
        job = await jobs.create("quiz_generation", {"learner": {...}}, {"count": 3})
        done = await jobs.wait(job.job_id, timeout_s=120)

Every call has a deadline (``timeout_s``, 30 s by default); ``UNAVAILABLE`` (a scheduler
restarting, a database away) and ``RESOURCE_EXHAUSTED`` (a cap, a stream limit) are retried with
exponential backoff and full jitter — after the server's ``google.rpc.RetryInfo`` delay when it
gives one — until the call's deadline. ``create`` makes an idempotency key when given none, so a
retried create is one job. Errors are raised as :class:`AijobError` subclasses carrying the gRPC
status, the public error code (``ErrorInfo.reason``, e.g. ``JOB_NOT_FOUND``) and its metadata.
Settings and tokens come from the same ``AIJOB_*`` variables as the CLI when not given
(:class:`aijob.connection.ClientSettings`). :class:`BlockingJobsClient` and
:class:`BlockingAdminClient` are the same for code without an event loop. docs/client.md has more.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import random
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Mapping
from typing import Any, TypeVar

import grpc
from google.protobuf import json_format

from aijob.connection import ClientSettings
from aijob.errors import (
    AijobError,
    AlreadyExistsError,
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
    error_details,
    error_of,
)
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc as admin_grpc
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import job_service_pb2_grpc as job_grpc
from shared.gen.aijob.v1 import types_pb2

__all__ = [
    "AdminClient",
    "AijobError",
    "AlreadyExistsError",
    "BlockingAdminClient",
    "BlockingJobsClient",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "InternalError",
    "InvalidArgumentError",
    "JobsClient",
    "NotFoundError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "UnauthenticatedError",
    "UnavailableError",
]

T = TypeVar("T")
TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
RETRIED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED})


class _Calls:
    """Deadlines and retries around the stubs' calls."""

    def __init__(self, timeout_s: float, max_backoff_s: float) -> None:
        self.timeout_s = timeout_s
        self.max_backoff_s = max_backoff_s

    async def call(
        self, send: Callable[[float], Awaitable[T]], timeout_s: float | None = None
    ) -> T:
        """``send(remaining_s)`` until it answers, is refused for good, or the deadline passes."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        attempt = 0
        while True:
            remaining = deadline - time.monotonic()
            try:
                return await send(max(0.001, remaining))
            except grpc.aio.AioRpcError as error:
                attempt += 1
                _, _, server_delay = error_details(error)
                backoff = server_delay or random.uniform(
                    0, min(self.max_backoff_s, 0.1 * 2**attempt)
                )
                if error.code() not in RETRIED or time.monotonic() + backoff >= deadline:
                    raise error_of(error) from None
                await asyncio.sleep(backoff)


class _Client:
    #: Whose token the client sends: "service" or "admin".
    _role = "service"
    _stub: Any

    def __init__(
        self,
        address: str | None = None,
        *,
        token: str | None = None,
        settings: ClientSettings | None = None,
        timeout_s: float = 30.0,
        max_backoff_s: float = 5.0,
    ) -> None:
        self._settings = settings or ClientSettings()
        self._channel = (
            self._settings.channel()
            if address is None
            else ClientSettings(scheduler_addr=address, tls_ca=self._settings.tls_ca).channel()
        )
        self._token = token or self._settings.token(self._role)
        self._calls = _Calls(timeout_s, max_backoff_s)

    def _metadata(self, *extra: tuple[str, str]) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self._token}"), *extra)

    def _call_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata()

    async def call(self, method: str, request: Any, *, timeout_s: float | None = None) -> Any:
        """Any unary RPC of the client's service, by name (``"CreateJob"``), with the client's
        token, deadline, retries and error classes: what the typed methods are built on."""
        rpc = getattr(self._stub, method)
        metadata = self._call_metadata()
        return await self._calls.call(
            lambda t: rpc(request, metadata=metadata, timeout=t), timeout_s
        )

    async def close(self) -> None:
        await self._channel.close(None)

    async def __aenter__(self: T) -> T:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()


class JobsClient(_Client):
    """The job API (a service token), acting for ``user_id``; ``options`` as :class:`_Client`
    takes them (token, settings, timeout_s, max_backoff_s)."""

    def __init__(
        self, address: str | None = None, *, user_id: str | None = None, **options: Any
    ) -> None:
        super().__init__(address, **options)
        self.user_id = user_id or self._settings.user_id
        self._stub = job_grpc.JobServiceStub(self._channel)

    def _user(self) -> tuple[tuple[str, str], ...]:
        return self._metadata(("x-user-id", self.user_id))

    def _call_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._user()

    async def create(
        self,
        job_type: str,
        snapshot: Mapping[str, Any],
        params: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> types_pb2.Job:
        """A new job (or the one an earlier call with the same idempotency key made); ``fields``
        are CreateJobRequest's others (priority, model, cost_policy, deadline, target_type...)."""
        request = job_pb.CreateJobRequest(
            job_type=job_type, idempotency_key=idempotency_key or str(uuid.uuid4()), **fields
        )
        json_format.ParseDict(dict(snapshot), request.snapshot)
        json_format.ParseDict(dict(params or {}), request.params)
        reply: job_pb.CreateJobResponse = await self._calls.call(
            lambda t: self._stub.CreateJob(request, metadata=self._user(), timeout=t)
        )
        return reply.job

    async def create_many(
        self, requests: list[job_pb.CreateJobsItem]
    ) -> list[job_pb.CreateJobsResult]:
        """Several creates in one call; each item has its own result (job or status)."""
        for item in requests:
            if not item.job.idempotency_key:
                item.job.idempotency_key = str(uuid.uuid4())
        reply: job_pb.CreateJobsResponse = await self._calls.call(
            lambda t: self._stub.CreateJobs(
                job_pb.CreateJobsRequest(items=requests), metadata=self._user(), timeout=t
            )
        )
        return list(reply.results)

    async def get(self, job_id: str) -> types_pb2.Job:
        return await self._calls.call(
            lambda t: self._stub.GetJob(
                job_pb.GetJobRequest(job_id=job_id), metadata=self._user(), timeout=t
            )
        )

    async def cancel(self, job_id: str) -> job_pb.CancelJobResponse:
        return await self._calls.call(
            lambda t: self._stub.CancelJob(
                job_pb.CancelJobRequest(job_id=job_id), metadata=self._user(), timeout=t
            )
        )

    async def watch(
        self, job_id: str, timeout_s: float | None = None
    ) -> AsyncIterator[types_pb2.Job]:
        """The job now, then each change, until it ends (or ``timeout_s`` passes:
        DeadlineExceededError)."""
        call = self._stub.WatchJob(
            job_pb.WatchJobRequest(job_id=job_id), metadata=self._user(), timeout=timeout_s
        )
        try:
            async for job in call:
                yield job
        except grpc.aio.AioRpcError as error:
            raise error_of(error) from None

    async def stream_output(
        self, job_id: str, after_offset: int = 0, timeout_s: float | None = None
    ) -> AsyncIterator[types_pb2.OutputChunk]:
        """The text the job's current attempt writes, after ``after_offset``, as it is written,
        until the job ends; a new attempt's chunks start again at offset 0 with its
        ``attempt_no``. To resume after a break, pass the end of the last chunk read."""
        call = self._stub.StreamOutput(
            job_pb.StreamOutputRequest(job_id=job_id, after_offset=after_offset),
            metadata=self._user(),
            timeout=timeout_s,
        )
        try:
            async for chunk in call:
                yield chunk
        except grpc.aio.AioRpcError as error:
            raise error_of(error) from None

    async def wait(self, job_id: str, timeout_s: float) -> types_pb2.Job:
        """The job once it has ended; DeadlineExceededError if it has not within ``timeout_s``."""
        last = await self.get(job_id)
        async for job in self.watch(job_id, timeout_s):
            last = job
        if last.lifecycle_status not in TERMINAL:
            raise DeadlineExceededError(
                grpc.StatusCode.DEADLINE_EXCEEDED, "", "the job did not end in time", {}
            )
        return last

    async def list(
        self, *, job_type: str = "", status: str = "", page_size: int = 50
    ) -> AsyncIterator[types_pb2.Job]:
        """The user's jobs, newest first, fetched a page at a time."""
        token = ""
        while True:
            request = job_pb.ListJobsRequest(
                job_type=job_type, lifecycle_status=status, page_size=page_size, page_token=token
            )
            page: job_pb.ListJobsResponse = await self._calls.call(
                functools.partial(self._list_page, request)
            )
            for job in page.jobs:
                yield job
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def _list_page(
        self, request: job_pb.ListJobsRequest, timeout_s: float
    ) -> job_pb.ListJobsResponse:
        reply: job_pb.ListJobsResponse = await self._stub.ListJobs(
            request, metadata=self._user(), timeout=timeout_s
        )
        return reply


class AdminClient(_Client):
    """The admin API (an admin token; a viewer token reads)."""

    _role = "admin"

    def __init__(self, address: str | None = None, **options: Any) -> None:
        super().__init__(address, **options)
        self._stub = admin_grpc.AdminServiceStub(self._channel)

    async def _reply(self, kind: type[T], method: str, request: Any) -> T:
        reply = await self._send(method, request)
        assert isinstance(reply, kind)
        return reply

    async def _send(self, method: str, request: Any) -> Any:
        return await self.call(method, request)

    async def get(self, job_id: str) -> types_pb2.Job:
        return await self._reply(types_pb2.Job, "GetJob", job_pb.GetJobRequest(job_id=job_id))

    async def retry(self, job_id: str) -> types_pb2.Job:
        return await self._reply(types_pb2.Job, "RetryJob", admin_pb.RetryJobRequest(job_id=job_id))

    async def stats(self) -> admin_pb.QueueStats:
        return await self._reply(
            admin_pb.QueueStats, "GetQueueStats", admin_pb.GetQueueStatsRequest()
        )

    async def cancel_user_jobs(self, user_id: str) -> admin_pb.CancelUserJobsResponse:
        request = admin_pb.CancelUserJobsRequest(user_id=user_id)
        return await self._reply(admin_pb.CancelUserJobsResponse, "CancelUserJobs", request)

    async def redrive(self, event_ids: list[str] | None = None) -> int:
        reply = await self._send(
            "RedriveDeadEvents", admin_pb.RedriveDeadEventsRequest(event_ids=event_ids or [])
        )
        return int(reply.redriven)

    async def put_model_limit(self, limit: admin_pb.ModelLimit) -> admin_pb.ModelLimit:
        request = admin_pb.PutModelLimitRequest(limit=limit)
        reply = await self._reply(admin_pb.PutModelLimitResponse, "PutModelLimit", request)
        return reply.limit

    async def usage(
        self, user_id: str, from_date: str = "", to_date: str = ""
    ) -> admin_pb.GetUserUsageResponse:
        request = admin_pb.GetUserUsageRequest(
            user_id=user_id, from_date=from_date, to_date=to_date
        )
        return await self._reply(admin_pb.GetUserUsageResponse, "GetUserUsage", request)

    async def list(self, page_size: int = 50, **filters: Any) -> AsyncIterator[types_pb2.Job]:
        """Every job the filters select (AdminListJobsRequest's fields), a page at a time."""
        token = ""
        while True:
            page = await self._send(
                "ListJobs",
                admin_pb.AdminListJobsRequest(page_size=page_size, page_token=token, **filters),
            )
            for job in page.jobs:
                yield job
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def page(
        self, page_size: int = 50, page_token: str = "", **filters: Any
    ) -> job_pb.ListJobsResponse:
        """One page of the jobs the filters select; its ``next_page_token`` names the next."""
        request = admin_pb.AdminListJobsRequest(
            page_size=page_size, page_token=page_token, **filters
        )
        return await self._reply(job_pb.ListJobsResponse, "ListJobs", request)

    async def cancel(self, job_id: str) -> job_pb.CancelJobResponse:
        request = job_pb.CancelJobRequest(job_id=job_id)
        return await self._reply(job_pb.CancelJobResponse, "CancelJob", request)

    async def timeline(self, job_id: str) -> admin_pb.JobTimeline:
        request = admin_pb.GetJobTimelineRequest(job_id=job_id)
        return await self._reply(admin_pb.JobTimeline, "GetJobTimeline", request)

    async def job_types(self) -> builtins.list[job_pb.JobType]:
        reply = await self._send("ListJobTypes", job_pb.ListJobTypesRequest())
        return list(reply.job_types)

    async def model_limits(self) -> builtins.list[admin_pb.ModelLimit]:
        reply = await self._send("ListModelLimits", admin_pb.ListModelLimitsRequest())
        return list(reply.limits)

    async def put_budget(
        self, user_id: str, daily_tokens: int, daily_cost_micros: int
    ) -> admin_pb.PutUserBudgetResponse:
        request = admin_pb.PutUserBudgetRequest(
            user_id=user_id, daily_tokens=daily_tokens, daily_cost_micros=daily_cost_micros
        )
        return await self._reply(admin_pb.PutUserBudgetResponse, "PutUserBudget", request)

    async def audit(self, page_size: int = 50) -> AsyncIterator[admin_pb.AuditEntry]:
        """The audit log, newest first."""
        token = ""
        while True:
            page = await self._send(
                "ListAuditEntries",
                admin_pb.ListAuditEntriesRequest(page_size=page_size, page_token=token),
            )
            for entry in page.entries:
                yield entry
            if not page.next_page_token:
                return
            token = page.next_page_token


class _Loop:
    """An event loop on a thread of its own, for the blocking clients."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def iterate(self, items: AsyncIterator[T]) -> Iterator[T]:
        while True:
            try:
                yield self.run(items.__anext__())  # type: ignore[arg-type]
            except StopAsyncIteration:
                return

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()


class _Blocking:
    """The async client's methods, run to completion (iterators: one item at a time)."""

    def __init__(self, make: Callable[[], _Client]) -> None:
        self._loop = _Loop()
        self._client = self._loop.run(_made(make))

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if not callable(method):
            return method

        def blocking(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            if hasattr(result, "__anext__"):
                return self._loop.iterate(result)
            return self._loop.run(result)

        return blocking

    def close(self) -> None:
        self._loop.run(self._client.close())
        self._loop.stop()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


async def _made(make: Callable[[], _Client]) -> _Client:
    return make()  # the channel belongs to the loop it is made on


class BlockingJobsClient(_Blocking):
    """:class:`JobsClient` for code without an event loop (same arguments and methods)."""

    def __init__(self, address: str | None = None, **options: Any) -> None:
        super().__init__(lambda: JobsClient(address, **options))


class BlockingAdminClient(_Blocking):
    """:class:`AdminClient` for code without an event loop (same arguments and methods)."""

    def __init__(self, address: str | None = None, **options: Any) -> None:
        super().__init__(lambda: AdminClient(address, **options))

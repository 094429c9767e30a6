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
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from typing import Any, TypeVar

import grpc
from google.protobuf import json_format

from aijob.admin_client import AdminClient
from aijob.calls import BaseClient
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
    error_of,
)
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


class JobsClient(BaseClient):
    """The job API (a service token), acting for ``user_id``; ``options`` as
    :class:`~aijob.calls.BaseClient` takes them (token, settings, timeout_s, max_backoff_s)."""

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
            job_type=job_type, idempotency_key=idempotency_key or "", **fields
        )
        json_format.ParseDict(dict(snapshot), request.snapshot)
        json_format.ParseDict(dict(params or {}), request.params)
        return (await self.submit(request)).job

    async def submit(self, request: job_pb.CreateJobRequest) -> job_pb.CreateJobResponse:
        """``request`` as it is, with an idempotency key made when it has none: the job, and
        whether this call created it."""
        if not request.idempotency_key:
            request.idempotency_key = str(uuid.uuid4())
        return await self._unary(self._stub.CreateJob, request)

    async def create_many(
        self, requests: list[job_pb.CreateJobsItem], *, timeout_s: float | None = None
    ) -> list[job_pb.CreateJobsResult]:
        """Several creates in one call; each item has its own result (job or status)."""
        for item in requests:
            if not item.job.idempotency_key:
                item.job.idempotency_key = str(uuid.uuid4())
        request = job_pb.CreateJobsRequest(items=requests)
        reply: job_pb.CreateJobsResponse = await self._unary(
            self._stub.CreateJobs, request, timeout_s
        )
        return list(reply.results)

    async def get(self, job_id: str) -> types_pb2.Job:
        return await self._unary(self._stub.GetJob, job_pb.GetJobRequest(job_id=job_id))

    async def cancel(self, job_id: str) -> job_pb.CancelJobResponse:
        return await self._unary(self._stub.CancelJob, job_pb.CancelJobRequest(job_id=job_id))

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
            page = await self.page(
                job_type=job_type, status=status, page_size=page_size, page_token=token
            )
            for job in page.jobs:
                yield job
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def page(
        self,
        *,
        job_type: str = "",
        status: str = "",
        page_size: int = 50,
        page_token: str = "",
        parent_job_id: str = "",
    ) -> job_pb.ListJobsResponse:
        """One page of the user's jobs (or of one job's children), newest first; its
        ``next_page_token`` names the next."""
        request = job_pb.ListJobsRequest(
            job_type=job_type,
            lifecycle_status=status,
            page_size=page_size,
            page_token=page_token,
            parent_job_id=parent_job_id,
        )
        return await self._unary(self._stub.ListJobs, request)

    async def job_types(self) -> job_pb.ListJobTypesResponse:
        """Every job type: its queue, attempts, models, reasoning and schemas."""
        return await self._unary(self._stub.ListJobTypes, job_pb.ListJobTypesRequest())

    async def tree(self, job_id: str) -> job_pb.GetJobTreeResponse:
        """The tree ``job_id`` belongs to, root first, with its usage rolled up."""
        return await self._unary(self._stub.GetJobTree, job_pb.GetJobTreeRequest(job_id=job_id))

    async def put_credential(
        self, provider: str, api_key: str, label: str = ""
    ) -> job_pb.PutUserCredentialResponse:
        """Store the user's own model key (encrypted); answered with its id and a masked hint."""
        request = job_pb.PutUserCredentialRequest(provider=provider, api_key=api_key, label=label)
        return await self._unary(self._stub.PutUserCredential, request)

    async def credentials(self) -> job_pb.ListUserCredentialsResponse:
        """The user's stored keys, masked."""
        return await self._unary(
            self._stub.ListUserCredentials, job_pb.ListUserCredentialsRequest()
        )

    async def delete_credential(self, credential_id: str) -> job_pb.DeleteUserCredentialResponse:
        request = job_pb.DeleteUserCredentialRequest(credential_id=credential_id)
        return await self._unary(self._stub.DeleteUserCredential, request)


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

    def __init__(self, make: Callable[[], BaseClient]) -> None:
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


async def _made(make: Callable[[], BaseClient]) -> BaseClient:
    return make()  # the channel belongs to the loop it is made on


class BlockingJobsClient(_Blocking):
    """:class:`JobsClient` for code without an event loop (same arguments and methods)."""

    def __init__(self, address: str | None = None, **options: Any) -> None:
        super().__init__(lambda: JobsClient(address, **options))


class BlockingAdminClient(_Blocking):
    """:class:`AdminClient` for code without an event loop (same arguments and methods)."""

    def __init__(self, address: str | None = None, **options: Any) -> None:
        super().__init__(lambda: AdminClient(address, **options))

"""gRPC servicers: translate protobuf to the scheduler's services and back."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime
from typing import Any

import grpc
from google.rpc import status_pb2
from opentelemetry.trace import SpanKind

from scheduler_service.api import convert
from scheduler_service.api.status import status_of
from scheduler_service.core import validation
from scheduler_service.core.cheap_hours import CheapHours
from scheduler_service.core.commands import CreateJobCommand, JobFilter
from scheduler_service.core.errors import InvalidRequestError, SchedulerError
from scheduler_service.core.events import EventType
from scheduler_service.core.job_catalog import describe
from scheduler_service.core.job_registry import JobRegistry
from scheduler_service.core.records import ArtifactRow, JobRecord
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.core.stream_caps import StreamCap
from scheduler_service.core.trees import ChildSummary
from scheduler_service.services.jobs import MAX_BULK_CREATE, Created, JobService
from scheduler_service.services.output_hub import OutputHub
from scheduler_service.services.watch_hub import WatchHub
from scheduler_service.sql.credentials import CredentialStore, checked_api_key, hint_of
from scheduler_service.sql.event_log import EventHub, latest_position
from scheduler_service.sql.uow import SqlUnitOfWork
from scheduler_service.wiring.setting_groups import StreamSettings
from shared import tracing
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import job_service_pb2_grpc as job_grpc
from shared.gen.aijob.v1 import types_pb2 as types_pb

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]
DEFAULT_EVENT_TYPES = (EventType.COMPLETED, EventType.FAILED, EventType.CANCELLED)


def _user_id(context: Context) -> str:
    """The user a JobService call acts for (metadata ``x-user-id``), exactly as sent; required."""
    user = _optional_user_id(context)
    if user is None:
        raise InvalidRequestError(
            "metadata x-user-id (the user acted for) is required", field="x-user-id"
        )
    return user


def _optional_user_id(context: Context) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "x-user-id" and isinstance(value, str):
            return validation.user_id(value)
    return None


@contextlib.contextmanager
def _create_span(context: Context, name: str, job_type: str) -> Iterator[tuple[Any, str]]:
    """The create's span, child of the caller's W3C trace context (metadata ``traceparent``),
    and the traceparent the job keeps: this span's, or the caller's when this process does not
    trace (the runtime may)."""
    metadata = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
    caller = metadata.get("traceparent", "")
    parent = tracing.context_of(caller, metadata.get("tracestate"))
    attributes = {"aijob.job_type": job_type} if job_type else {}
    with tracing.span(name, parent=parent, kind=SpanKind.SERVER, attributes=attributes) as span:
        yield span, tracing.inject(span) or (caller if parent is not None else "")


def _failed(exc: SchedulerError) -> job_pb.CreateJobsResult:
    """One item's answer when it fails: the status its own CreateJob would have answered."""
    _code, status = status_of(exc, "CreateJobs")
    return job_pb.CreateJobsResult(status=status)


@dataclasses.dataclass(frozen=True, slots=True)
class Hubs:
    """What a replica's streams follow: watched jobs, written output, the event log."""

    watch: WatchHub
    output: OutputHub
    events: EventHub


@dataclasses.dataclass(frozen=True, slots=True)
class JobMessages:
    """The job as the API shows it, with when an off-peak job stops waiting, if it waits."""

    #: The cheap hours as the claim judges them now (an operator may change the peak windows).
    cheap_hours: Callable[[], CheapHours]
    #: The database's now, sampled each reaper sweep.
    db_now: Callable[[], datetime | None]

    def of(
        self,
        record: JobRecord,
        artifacts: list[ArtifactRow] | None = None,
        *,
        internal: bool = False,
        children: ChildSummary | None = None,
    ) -> types_pb.Job:
        waits = self.cheap_hours().deferred_until(
            record.costPolicy,
            record.lifecycleStatus is LifecycleStatus.QUEUED,
            record.deadlineAt,
            record.maxAttempts * record.timeoutMs,
            self.db_now(),
        )
        return convert.job(
            record, artifacts, internal=internal, deferred_until=waits, children=children
        )


class JobServicer(job_grpc.JobServiceServicer):
    def __init__(
        self,
        jobs: JobService,
        credentials: CredentialStore,
        hubs: Hubs,
        *,
        messages: JobMessages,
        registry: JobRegistry,
        uow: SqlUnitOfWork,
        streams: StreamSettings,
    ) -> None:
        self._jobs = jobs
        self._credentials = credentials
        self._hubs = hubs
        self._messages = messages
        self._registry = registry
        self._uow = uow
        self._watch_cap = StreamCap("WatchJob", streams.max_watch_streams_per_token)
        self._output_cap = StreamCap("StreamOutput", streams.max_watch_streams_per_token)
        self._subscribe_cap = StreamCap("SubscribeEvents", streams.max_subscribe_streams_per_token)

    async def CreateJob(
        self, request: job_pb.CreateJobRequest, context: Context
    ) -> job_pb.CreateJobResponse:
        with _create_span(context, "aijob.CreateJob", request.job_type) as (span, traceparent):
            command = convert.create_command(request, _user_id(context))
            command = dataclasses.replace(command, traceparent=traceparent)
            record, created = await self._jobs.create(command)
            span.set_attribute("aijob.job_id", record.id)
        return job_pb.CreateJobResponse(job=self._messages.of(record, []), created=created)

    async def CreateJobs(
        self, request: job_pb.CreateJobsRequest, context: Context
    ) -> job_pb.CreateJobsResponse:
        if len(request.items) > MAX_BULK_CREATE:
            raise InvalidRequestError(f"at most {MAX_BULK_CREATE} items per call", field="items")
        caller = _optional_user_id(context)
        commands: dict[int, CreateJobCommand] = {}
        answers: dict[int, job_pb.CreateJobsResult] = {}
        for index, item in enumerate(request.items):
            try:
                user = validation.user_id(item.user_id, "user_id") if item.user_id else caller
                if user is None:
                    raise InvalidRequestError(
                        "each item needs user_id, or the call x-user-id", field="user_id"
                    )
                commands[index] = convert.create_command(item.job, user)
            except SchedulerError as exc:
                answers[index] = _failed(exc)
        order = list(commands)
        # "#N" names item N of the request; the service counts the items that reached it.
        position = {item: place for place, item in enumerate(order)}
        for index, command in commands.items():
            if command.parent_job_id.startswith("#") and command.parent_job_id[1:].isdigit():
                earlier = int(command.parent_job_id[1:])
                named = f"#{position[earlier]}" if earlier in position else "#unmade"
                commands[index] = dataclasses.replace(command, parent_job_id=named)
        with _create_span(context, "aijob.CreateJobs", "") as (span, traceparent):
            span.set_attribute("aijob.items", len(request.items))
            results = await self._jobs.create_many(
                [dataclasses.replace(commands[i], traceparent=traceparent) for i in order]
            )
        for index, result in zip(order, results, strict=True):
            if isinstance(result, Created):
                answers[index] = job_pb.CreateJobsResult(
                    status=status_pb2.Status(code=0),
                    job=self._messages.of(result.job, []),
                    created=result.created,
                )
            else:
                answers[index] = _failed(result)
        return job_pb.CreateJobsResponse(results=[answers[i] for i in range(len(request.items))])

    async def GetJob(self, request: job_pb.GetJobRequest, context: Context) -> types_pb.Job:
        record, artifacts = await self._jobs.get(_user_id(context), request.job_id)
        children = await self._jobs.trees.children_of(record)
        return self._messages.of(record, artifacts, children=children)

    async def GetJobTree(
        self, request: job_pb.GetJobTreeRequest, context: Context
    ) -> job_pb.GetJobTreeResponse:
        tree = await self._jobs.trees.tree(_user_id(context), request.job_id)
        return convert.job_tree(tree)

    async def CancelJob(
        self, request: job_pb.CancelJobRequest, context: Context
    ) -> job_pb.CancelJobResponse:
        record, outcome = await self._jobs.cancel(_user_id(context), request.job_id)
        return job_pb.CancelJobResponse(job=self._messages.of(record), outcome=outcome)

    async def WatchJob(
        self, request: job_pb.WatchJobRequest, context: Context
    ) -> AsyncIterator[types_pb.Job]:
        with self._watch_cap.held():
            hub = self._hubs.watch
            async for record in self._jobs.watch(
                _user_id(context), request.job_id, changed=hub.changed, current=hub.current
            ):
                terminal = record.is_terminal
                artifacts = await hub.artifacts(record.id) if terminal else None
                # A parent's updates carry its children's counts, as GetJob's answer does.
                children = await self._jobs.trees.children_of(record)
                yield self._messages.of(record, artifacts, children=children)

    async def StreamOutput(
        self, request: job_pb.StreamOutputRequest, context: Context
    ) -> AsyncIterator[types_pb.OutputChunk]:
        with self._output_cap.held():
            # The access rules of GetJob: another user's job is NOT_FOUND.
            record, _ = await self._jobs.get(_user_id(context), request.job_id)
            async for chunk in self._hubs.output.follow(record.id, request.after_offset):
                yield types_pb.OutputChunk(
                    attempt_no=chunk.attempt_no, offset=chunk.offset, text=chunk.text
                )

    async def ListJobs(
        self, request: job_pb.ListJobsRequest, context: Context
    ) -> job_pb.ListJobsResponse:
        filters = JobFilter(
            user_id=_user_id(context),
            job_type=request.job_type,
            lifecycle_status=request.lifecycle_status,
            parent_job_id=request.parent_job_id,
        )
        records, token = await self._jobs.list_jobs(filters, request.page_size, request.page_token)
        return job_pb.ListJobsResponse(
            jobs=[self._messages.of(r) for r in records], next_page_token=token
        )

    async def ListJobTypes(
        self, request: job_pb.ListJobTypesRequest, context: Context
    ) -> job_pb.ListJobTypesResponse:
        return job_pb.ListJobTypesResponse(
            job_types=[convert.job_type(info) for info in describe(self._registry)]
        )

    async def PutUserCredential(
        self, request: job_pb.PutUserCredentialRequest, context: Context
    ) -> job_pb.PutUserCredentialResponse:
        user = _user_id(context)
        provider = request.provider or "deepseek"
        api_key = checked_api_key(provider, request.api_key)
        if len(request.label) > 100:
            raise InvalidRequestError("label is longer than 100 characters", field="label")
        credential_id = await self._credentials.store(
            user, api_key, label=request.label, provider=provider
        )
        log.info("a user credential was stored", extra={"action": "credential_put"})
        return job_pb.PutUserCredentialResponse(
            credential_id=credential_id, hint=hint_of(provider, api_key[-4:])
        )

    async def ListUserCredentials(
        self, request: job_pb.ListUserCredentialsRequest, context: Context
    ) -> job_pb.ListUserCredentialsResponse:
        stored = await self._credentials.listed(_user_id(context))
        return job_pb.ListUserCredentialsResponse(
            credentials=[
                job_pb.UserCredential(
                    credential_id=c.credential_id,
                    provider=c.provider,
                    hint=c.hint,
                    label=c.label,
                    created_at=convert.timestamp(c.created_at),
                )
                for c in stored
            ]
        )

    async def DeleteUserCredential(
        self, request: job_pb.DeleteUserCredentialRequest, context: Context
    ) -> job_pb.DeleteUserCredentialResponse:
        credential_id = validation.credential_id(request.credential_id)
        await self._credentials.delete(_user_id(context), credential_id)
        log.info("a user credential was deleted", extra={"action": "credential_delete"})
        return job_pb.DeleteUserCredentialResponse(credential_id=credential_id)

    async def SubscribeEvents(
        self, request: job_pb.SubscribeEventsRequest, context: Context
    ) -> AsyncIterator[types_pb.JobEvent]:
        types = list(request.event_types) or list(DEFAULT_EVENT_TYPES)
        unknown = sorted(set(types) - {t.value for t in EventType})
        if unknown:
            raise InvalidRequestError(f"unknown event types {unknown}", field="event_types")
        latest = await latest_position(self._uow)
        after = latest
        if request.after_event_id:
            after = validation.event_position(request.after_event_id, "after_event_id")
            if after > latest:
                # Waiting silently would hide a client that resumes against another log.
                raise InvalidRequestError(
                    f"after_event_id {after} is beyond the end of the event log ({latest})",
                    field="after_event_id",
                )
        with self._subscribe_cap.held():
            async for event in self._hubs.events.follow(after, types):
                yield types_pb.JobEvent(
                    event_id=str(event.position),
                    event_type=event.event_type,
                    job_id=event.job_id,
                    job_type=event.job_type,
                    occurred_at=convert.timestamp(event.occurred_at),
                    user_id=event.user_id,
                )


__all__ = ["Context", "Hubs", "JobMessages", "JobServicer"]

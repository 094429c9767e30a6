"""gRPC servicers: translate protobuf to the scheduler's services and back."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
from google.rpc import status_pb2
from opentelemetry.trace import SpanKind

from scheduler_service import validation
from scheduler_service.api import convert
from scheduler_service.api.status import status_of
from scheduler_service.app import SchedulerApp
from scheduler_service.billing.service import Billing
from scheduler_service.credentials import checked_api_key, hint_of
from scheduler_service.errors import InvalidRequestError, SchedulerError
from scheduler_service.flow.keys import KeyStats, Limits, ModelKey
from scheduler_service.flow.service import ModelKeys, checked_key, checked_limits
from scheduler_service.jobs.commands import CreateJobCommand, JobFilter
from scheduler_service.jobs.service import MAX_BULK_CREATE, Created
from scheduler_service.jobs.stats import queue_stats, redrive_dead_events
from scheduler_service.lifecycle.records import ArtifactRow, JobRecord
from scheduler_service.lifecycle.state_machine import LifecycleStatus
from scheduler_service.outbox.events import EventType
from scheduler_service.outbox.log import latest_position
from scheduler_service.registry.catalog import describe
from scheduler_service.registry.definitions import USER_KEY_MODE
from scheduler_service.stream_caps import StreamCap
from shared import tracing
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc as admin_grpc
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


def _job(
    app: SchedulerApp,
    record: JobRecord,
    artifacts: list[ArtifactRow] | None = None,
    *,
    internal: bool = False,
) -> types_pb.Job:
    """The job as the API shows it, with when an off-peak job stops waiting, if it waits."""
    waits = app.protocol.cheap_hours.deferred_until(
        record.costPolicy,
        record.lifecycleStatus is LifecycleStatus.QUEUED,
        record.deadlineAt,
        record.maxAttempts * record.timeoutMs,
        app.db_clock.now(),
    )
    return convert.job(record, artifacts, internal=internal, deferred_until=waits)


class JobServicer(job_grpc.JobServiceServicer):
    def __init__(self, app: SchedulerApp) -> None:
        self._app = app
        streams = app.settings.streams
        self._watch_cap = StreamCap("WatchJob", streams.max_watch_streams_per_token)
        self._subscribe_cap = StreamCap("SubscribeEvents", streams.max_subscribe_streams_per_token)

    async def CreateJob(
        self, request: job_pb.CreateJobRequest, context: Context
    ) -> job_pb.CreateJobResponse:
        with _create_span(context, "aijob.CreateJob", request.job_type) as (span, traceparent):
            command = convert.create_command(request, _user_id(context))
            command = dataclasses.replace(command, traceparent=traceparent)
            record, created = await self._app.jobs.create(command)
            span.set_attribute("aijob.job_id", record.id)
        return job_pb.CreateJobResponse(job=_job(self._app, record, []), created=created)

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
        with _create_span(context, "aijob.CreateJobs", "") as (span, traceparent):
            span.set_attribute("aijob.items", len(request.items))
            results = await self._app.jobs.create_many(
                [dataclasses.replace(commands[i], traceparent=traceparent) for i in order]
            )
        for index, result in zip(order, results, strict=True):
            if isinstance(result, Created):
                answers[index] = job_pb.CreateJobsResult(
                    status=status_pb2.Status(code=0),
                    job=_job(self._app, result.job, []),
                    created=result.created,
                )
            else:
                answers[index] = _failed(result)
        return job_pb.CreateJobsResponse(results=[answers[i] for i in range(len(request.items))])

    async def GetJob(self, request: job_pb.GetJobRequest, context: Context) -> types_pb.Job:
        record, artifacts = await self._app.jobs.get(_user_id(context), request.job_id)
        return _job(self._app, record, artifacts)

    async def CancelJob(
        self, request: job_pb.CancelJobRequest, context: Context
    ) -> job_pb.CancelJobResponse:
        record, outcome = await self._app.jobs.cancel(_user_id(context), request.job_id)
        return job_pb.CancelJobResponse(job=_job(self._app, record), outcome=outcome)

    async def WatchJob(
        self, request: job_pb.WatchJobRequest, context: Context
    ) -> AsyncIterator[types_pb.Job]:
        with self._watch_cap.held():
            hub = self._app.watch_hub
            async for record in self._app.jobs.watch(
                _user_id(context), request.job_id, changed=hub.changed, current=hub.current
            ):
                terminal = record.is_terminal
                artifacts = await hub.artifacts(record.id) if terminal else None
                yield _job(self._app, record, artifacts)

    async def ListJobs(
        self, request: job_pb.ListJobsRequest, context: Context
    ) -> job_pb.ListJobsResponse:
        filters = JobFilter(
            user_id=_user_id(context),
            job_type=request.job_type,
            lifecycle_status=request.lifecycle_status,
        )
        records, token = await self._app.jobs.list_jobs(
            filters, request.page_size, request.page_token
        )
        return job_pb.ListJobsResponse(
            jobs=[_job(self._app, r) for r in records], next_page_token=token
        )

    async def ListJobTypes(
        self, request: job_pb.ListJobTypesRequest, context: Context
    ) -> job_pb.ListJobTypesResponse:
        return job_pb.ListJobTypesResponse(
            job_types=[convert.job_type(info) for info in describe(self._app.registry)]
        )

    async def PutUserCredential(
        self, request: job_pb.PutUserCredentialRequest, context: Context
    ) -> job_pb.PutUserCredentialResponse:
        user = _user_id(context)
        provider = request.provider or "deepseek"
        api_key = checked_api_key(provider, request.api_key)
        if len(request.label) > 100:
            raise InvalidRequestError("label is longer than 100 characters", field="label")
        credential_id = await self._app.credentials.store(
            user, api_key, label=request.label, provider=provider
        )
        log.info("a user credential was stored", extra={"action": "credential_put"})
        return job_pb.PutUserCredentialResponse(
            credential_id=credential_id, hint=hint_of(provider, api_key[-4:])
        )

    async def ListUserCredentials(
        self, request: job_pb.ListUserCredentialsRequest, context: Context
    ) -> job_pb.ListUserCredentialsResponse:
        stored = await self._app.credentials.listed(_user_id(context))
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
        await self._app.credentials.delete(_user_id(context), credential_id)
        log.info("a user credential was deleted", extra={"action": "credential_delete"})
        return job_pb.DeleteUserCredentialResponse(credential_id=credential_id)

    async def SubscribeEvents(
        self, request: job_pb.SubscribeEventsRequest, context: Context
    ) -> AsyncIterator[types_pb.JobEvent]:
        types = list(request.event_types) or list(DEFAULT_EVENT_TYPES)
        unknown = sorted(set(types) - {t.value for t in EventType})
        if unknown:
            raise InvalidRequestError(f"unknown event types {unknown}", field="event_types")
        latest = await latest_position(self._app.uow)
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
            async for event in self._app.event_hub.follow(after, types):
                yield types_pb.JobEvent(
                    event_id=str(event.position),
                    event_type=event.event_type,
                    job_id=event.job_id,
                    job_type=event.job_type,
                    occurred_at=convert.timestamp(event.occurred_at),
                    user_id=event.user_id,
                )


class AdminServicer(admin_grpc.AdminServiceServicer):
    def __init__(self, app: SchedulerApp) -> None:
        self._app = app

    async def ListJobs(
        self, request: admin_pb.AdminListJobsRequest, context: Context
    ) -> job_pb.ListJobsResponse:
        filters = JobFilter(
            user_id=validation.user_id(request.user_id, "user_id") if request.user_id else None,
            job_type=request.job_type,
            lifecycle_status=request.lifecycle_status,
            queue_name=request.queue_name,
            created_after=convert.from_timestamp(
                request.created_after, request.HasField("created_after"), "created_after"
            ),
            created_before=convert.from_timestamp(
                request.created_before, request.HasField("created_before"), "created_before"
            ),
        )
        records, token = await self._app.jobs.list_jobs(
            filters, request.page_size, request.page_token
        )
        return job_pb.ListJobsResponse(
            jobs=[_job(self._app, r, internal=True) for r in records], next_page_token=token
        )

    async def GetJob(self, request: job_pb.GetJobRequest, context: Context) -> types_pb.Job:
        record, artifacts = await self._app.jobs.get_any(request.job_id)
        return _job(self._app, record, artifacts, internal=True)

    async def RetryJob(self, request: admin_pb.RetryJobRequest, context: Context) -> types_pb.Job:
        record = await self._app.jobs.retry(request.job_id)
        log.info(
            "admin retried a job",
            extra={"action": "admin_retry", "jobId": request.job_id, "newJobId": record.id},
        )
        return _job(self._app, record, internal=True)

    async def GetQueueStats(
        self, request: admin_pb.GetQueueStatsRequest, context: Context
    ) -> admin_pb.QueueStats:
        stats = await queue_stats(self._app.uow, self._app.protocol.cheap_hours.defer_ms())
        return admin_pb.QueueStats(
            depths=[
                admin_pb.QueueDepth(queue_name=q, job_type=t, lifecycle_status=s, count=n)
                for q, t, s, n in stats.depths
            ],
            oldest_queued=[
                admin_pb.QueueAge(queue_name=q, age_seconds=age)
                for q, age in sorted(stats.oldest_queued_s.items())
            ],
            running_count=stats.running,
            dead_outbox_events=stats.dead_events,
            pending_outbox_events=stats.pending_events,
            outbox_lag_seconds=stats.outbox_lag_s,
            model_keys=[_key_stats(k) for k in await self._model_keys().stats()],
            deferred=[
                admin_pb.QueueDeferred(queue_name=q, count=n)
                for q, n in sorted(stats.deferred.items())
            ],
        )

    def _model_keys(self) -> ModelKeys:
        return ModelKeys(self._app.uow, self._app.protocol.flow)

    async def PutModelLimit(
        self, request: admin_pb.PutModelLimitRequest, context: Context
    ) -> admin_pb.PutModelLimitResponse:
        limit = request.limit
        key = checked_key(limit.provider, limit.model, limit.credential_scope)
        limits = checked_limits(
            limit.max_concurrency,
            limit.requests_per_minute,
            limit.tokens_per_minute,
            limit.daily_cost_micros,
            limit.max_concurrency_per_user,
        )
        await self._model_keys().put(key, limits)
        log.info(
            "admin set a model limit",
            extra={"action": "admin_model_limit", "provider": key.provider, "model": key.model},
        )
        return admin_pb.PutModelLimitResponse(limit=_model_limit(key, limits))

    async def ListModelLimits(
        self, request: admin_pb.ListModelLimitsRequest, context: Context
    ) -> admin_pb.ListModelLimitsResponse:
        keys = await self._model_keys().stats()
        return admin_pb.ListModelLimitsResponse(
            limits=[_model_limit(k.key, k.limits) for k in keys]
        )

    async def ReencryptCredentials(
        self, request: admin_pb.ReencryptCredentialsRequest, context: Context
    ) -> admin_pb.ReencryptCredentialsResponse:
        moved, version = await self._app.credentials.reencrypt_all()
        log.info(
            "admin re-encrypted credentials",
            extra={"action": "admin_reencrypt", "count": moved, "key_version": version},
        )
        return admin_pb.ReencryptCredentialsResponse(reencrypted=moved, key_version=version)

    def _billing(self) -> Billing:
        return Billing(self._app.uow, self._app.settings.budget, USER_KEY_MODE)

    async def PutUserBudget(
        self, request: admin_pb.PutUserBudgetRequest, context: Context
    ) -> admin_pb.PutUserBudgetResponse:
        budget = await self._billing().put_budget(
            request.user_id, request.daily_tokens, request.daily_cost_micros
        )
        log.info("admin set a user budget", extra={"action": "admin_user_budget"})
        return admin_pb.PutUserBudgetResponse(
            user_id=request.user_id,
            daily_tokens=budget.daily_tokens,
            daily_cost_micros=budget.daily_cost_micros,
        )

    async def GetUserUsage(
        self, request: admin_pb.GetUserUsageRequest, context: Context
    ) -> admin_pb.GetUserUsageResponse:
        report = await self._billing().usage(request.user_id, request.from_date, request.to_date)
        total = report.total
        return admin_pb.GetUserUsageResponse(
            prompt_tokens=total.prompt_tokens,
            completion_tokens=total.completion_tokens,
            cost_micros=total.cost_micros,
            jobs=total.jobs,
            attempts=total.attempts,
            cached_prompt_tokens=total.cached_prompt_tokens,
            peak_cost_micros=total.peak_cost_micros,
            off_peak_cost_micros=total.off_peak_cost_micros,
            saved_cost_micros=total.saved_cost_micros,
            from_date=report.first_day.isoformat(),
            to_date=report.last_day.isoformat(),
            model_keys=[
                admin_pb.ModelKeyUsage(
                    provider=key.provider,
                    model=key.model,
                    credential_scope=key.scope,
                    prompt_tokens=line.prompt_tokens,
                    completion_tokens=line.completion_tokens,
                    cost_micros=line.cost_micros,
                    jobs=line.jobs,
                    attempts=line.attempts,
                    cached_prompt_tokens=line.cached_prompt_tokens,
                )
                for key, line in sorted(report.by_key.items())
            ],
            daily_tokens_budget=report.budget.daily_tokens,
            daily_cost_budget_micros=report.budget.daily_cost_micros,
            tokens_today=report.today.tokens,
            cost_today_micros=report.today.cost_micros,
        )

    async def CancelUserJobs(
        self, request: admin_pb.CancelUserJobsRequest, context: Context
    ) -> admin_pb.CancelUserJobsResponse:
        cancelled, requested = await self._app.jobs.cancel_user_jobs(request.user_id)
        log.info(
            "admin cancelled a user's jobs",
            extra={"action": "admin_cancel_user", "cancelled": cancelled, "requested": requested},
        )
        return admin_pb.CancelUserJobsResponse(cancelled=cancelled, cancel_requested=requested)

    async def RedriveDeadEvents(
        self, request: admin_pb.RedriveDeadEventsRequest, context: Context
    ) -> admin_pb.RedriveDeadEventsResponse:
        try:
            ids = [int(i) for i in request.event_ids]
        except ValueError:
            raise InvalidRequestError(
                "event_ids must be outbox event ids", field="event_ids"
            ) from None
        redriven = await redrive_dead_events(self._app.uow, ids)
        self._app.outbox.notify()
        log.info("admin redrove dead events", extra={"action": "admin_redrive", "count": redriven})
        return admin_pb.RedriveDeadEventsResponse(redriven=redriven)

    async def AdoptLegacyJobs(
        self, request: admin_pb.AdoptLegacyJobsRequest, context: Context
    ) -> admin_pb.AdoptLegacyJobsResponse:
        adoption = await self._app.legacy.adopt(request.job_type, dry_run=request.dry_run)
        return admin_pb.AdoptLegacyJobsResponse(
            adopted=adoption.adopted, left_to_legacy=adoption.left_to_legacy
        )


def _model_limit(key: ModelKey, limits: Limits) -> admin_pb.ModelLimit:
    return admin_pb.ModelLimit(
        provider=key.provider,
        model=key.model,
        credential_scope=key.scope,
        max_concurrency=limits.max_concurrency,
        requests_per_minute=limits.requests_per_minute,
        tokens_per_minute=limits.tokens_per_minute,
        daily_cost_micros=limits.daily_cost_micros,
        max_concurrency_per_user=limits.max_concurrency_per_user,
    )


def _key_stats(stats: KeyStats) -> admin_pb.ModelKeyStats:
    return admin_pb.ModelKeyStats(
        limit=_model_limit(stats.key, stats.limits),
        in_flight=stats.in_flight,
        effective_concurrency=stats.effective_concurrency,
        paused_until=convert.timestamp(stats.paused_until),
        rate_limited_total=stats.rate_limited_total,
        rate_limited_last_minute=stats.rate_limited_last_minute,
        cost_today_micros=stats.cost_today_micros,
    )


__all__ = ["AdminServicer", "JobServicer"]

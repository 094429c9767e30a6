"""The AdminService's views: what an operator reads, and all a viewer token may call
(scheduler_service/api/auth.py). :class:`AdminServicer` adds the actions."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from scheduler_service.api import convert
from scheduler_service.api.servicers import Context, JobMessages
from scheduler_service.core import validation
from scheduler_service.core.breakers import BreakerState
from scheduler_service.core.cheap_hours import CheapHours
from scheduler_service.core.commands import JobFilter
from scheduler_service.core.errors import InvalidRequestError
from scheduler_service.core.identity import current
from scheduler_service.core.job_catalog import describe
from scheduler_service.core.job_registry import JobRegistry
from scheduler_service.core.model_keys import KeyStats, ModelKey, ModelKeyLimits
from scheduler_service.core.routes import ModelRoute
from scheduler_service.services.billing import Billing
from scheduler_service.services.flow import ModelKeys
from scheduler_service.services.jobs import JobService
from scheduler_service.services.routing import ModelRoutes
from scheduler_service.sql.audit import AuditLog
from scheduler_service.sql.credentials import CredentialStore
from scheduler_service.sql.job_stats import queue_stats
from scheduler_service.sql.job_timeline import job_timeline
from scheduler_service.sql.legacy_adoption import LegacyAdoption
from scheduler_service.sql.outbox_dispatcher import OutboxDispatcher
from scheduler_service.sql.uow import SqlUnitOfWork
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc as admin_grpc
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import types_pb2 as types_pb

log = logging.getLogger(__name__)

__all__ = ["AdminUseCases", "AdminViews", "model_limit_message", "route_message"]


@dataclass(frozen=True, slots=True)
class AdminUseCases:
    """What the admin API calls: the job API's operations, the admin-only ones, and the
    statements its views read (job timelines, queue stats, dead events) on ``uow``."""

    jobs: JobService
    registry: JobRegistry
    model_keys: ModelKeys
    model_routes: ModelRoutes
    billing: Billing
    audit_log: AuditLog
    credentials: CredentialStore
    legacy: LegacyAdoption
    outbox: OutboxDispatcher
    uow: SqlUnitOfWork
    #: The cheap hours as the claim judges them now.
    cheap_hours: Callable[[], CheapHours]


class AdminViews(admin_grpc.AdminServiceServicer):
    def __init__(self, use_cases: AdminUseCases, messages: JobMessages) -> None:
        self._use = use_cases
        self._messages = messages

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
            error_code=request.error_code,
            parent_job_id=request.parent_job_id,
        )
        records, token = await self._use.jobs.list_jobs(
            filters, request.page_size, request.page_token
        )
        internal = _may_read_internal()
        return job_pb.ListJobsResponse(
            jobs=[self._messages.of(r, internal=internal) for r in records],
            next_page_token=token,
        )

    async def GetJob(self, request: job_pb.GetJobRequest, context: Context) -> types_pb.Job:
        record, artifacts = await self._use.jobs.get_any(request.job_id)
        children = await self._use.jobs.trees.children_of(record)
        return self._messages.of(
            record, artifacts, internal=_may_read_internal(), children=children
        )

    async def GetJobTree(
        self, request: job_pb.GetJobTreeRequest, context: Context
    ) -> job_pb.GetJobTreeResponse:
        return convert.job_tree(await self._use.jobs.trees.tree(None, request.job_id))

    async def GetJobTimeline(
        self, request: admin_pb.GetJobTimelineRequest, context: Context
    ) -> admin_pb.JobTimeline:
        await self._use.jobs.get_any(request.job_id)  # NOT_FOUND for a job that is not there
        timeline = await job_timeline(self._use.uow, request.job_id)
        return admin_pb.JobTimeline(
            events=[
                admin_pb.TimelineEvent(
                    event_type=e.event_type,
                    occurred_at=convert.timestamp(e.occurred_at),
                    payload_json=e.payload_json,
                )
                for e in timeline.events
            ],
            attempts=[
                admin_pb.TimelineAttempt(
                    attempt_no=a.attempt_no,
                    runtime_instance_id=a.runtime_instance_id,
                    model=a.model,
                    prompt_tokens=a.prompt_tokens,
                    completion_tokens=a.completion_tokens,
                    cost_micros=a.cost_micros,
                    latency_ms=a.latency_ms,
                    error_code=a.error_code,
                    recorded_at=convert.timestamp(a.recorded_at),
                    cached_prompt_tokens=a.cached_prompt_tokens,
                    reasoning_tokens=a.reasoning_tokens,
                    model_tier=a.model_tier,
                )
                for a in timeline.attempts
            ],
            snapshot_json=timeline.snapshot_json,
            params_json=timeline.params_json,
        )

    async def ListJobTypes(
        self, request: job_pb.ListJobTypesRequest, context: Context
    ) -> job_pb.ListJobTypesResponse:
        return job_pb.ListJobTypesResponse(
            job_types=[convert.job_type(info) for info in describe(self._use.registry)]
        )

    async def GetQueueStats(
        self, request: admin_pb.GetQueueStatsRequest, context: Context
    ) -> admin_pb.QueueStats:
        stats = await queue_stats(self._use.uow, self._use.cheap_hours().defer_ms())
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
            model_keys=[_key_stats(k) for k in await self._use.model_keys.stats()],
            deferred=[
                admin_pb.QueueDeferred(queue_name=q, count=n)
                for q, n in sorted(stats.deferred.items())
            ],
            finished_last_hour=[
                admin_pb.QueueDepth(queue_name=q, job_type=t, lifecycle_status=s, count=n)
                for q, t, s, n in stats.finished_last_hour
            ],
        )

    async def ListModelLimits(
        self, request: admin_pb.ListModelLimitsRequest, context: Context
    ) -> admin_pb.ListModelLimitsResponse:
        keys = {k.key: k.limits for k in await self._use.model_keys.stats()}
        breakers = await self._use.model_routes.states()
        for key in breakers.keys() - keys.keys():
            keys[key] = ModelKeyLimits()
        return admin_pb.ListModelLimitsResponse(
            limits=[
                model_limit_message(key, limits, breakers.get(key, BreakerState.CLOSED))
                for key, limits in sorted(keys.items())
            ]
        )

    async def GetModelRoute(
        self, request: admin_pb.GetModelRouteRequest, context: Context
    ) -> admin_pb.ModelRoute:
        return route_message(await self._use.model_routes.route(request.job_type))

    async def GetUserUsage(
        self, request: admin_pb.GetUserUsageRequest, context: Context
    ) -> admin_pb.GetUserUsageResponse:
        report = await self._use.billing.usage(request.user_id, request.from_date, request.to_date)
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
            reasoning_tokens=total.reasoning_tokens,
            cache_hit_share=total.cache_hit_share,
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

    async def ListAuditEntries(
        self, request: admin_pb.ListAuditEntriesRequest, context: Context
    ) -> admin_pb.ListAuditEntriesResponse:
        size = request.page_size or 50
        if not 1 <= size <= 500:
            raise InvalidRequestError("page_size must be 1-500", field="page_size")
        token = request.page_token
        if token and not token.isdigit():
            raise InvalidRequestError("page_token is not one this server gave", field="page_token")
        entries = await self._use.audit_log.page(size + 1, int(token) if token else None)
        shown = entries[:size]
        return admin_pb.ListAuditEntriesResponse(
            entries=[
                admin_pb.AuditEntry(
                    entry_id=str(e.entry_id),
                    occurred_at=convert.timestamp(e.occurred_at),
                    actor=e.actor,
                    role=e.role,
                    action=e.action,
                    target_json=e.target,
                    outcome=e.outcome,
                    detail=e.detail,
                )
                for e in shown
            ],
            next_page_token=str(shown[-1].entry_id) if len(entries) > size else "",
        )


_BREAKER_STATES = {
    BreakerState.CLOSED: admin_pb.BREAKER_STATE_CLOSED,
    BreakerState.OPEN: admin_pb.BREAKER_STATE_OPEN,
    BreakerState.HALF_OPEN: admin_pb.BREAKER_STATE_HALF_OPEN,
}


def route_message(route: ModelRoute) -> admin_pb.ModelRoute:
    return admin_pb.ModelRoute(
        job_type=route.job_type,
        tiers=[admin_pb.ModelTier(provider=t.provider, model=t.model) for t in route.tiers],
    )


def model_limit_message(
    key: ModelKey, limits: ModelKeyLimits, breaker: BreakerState | None = None
) -> admin_pb.ModelLimit:
    return admin_pb.ModelLimit(
        breaker_state=(
            _BREAKER_STATES[breaker] if breaker is not None else admin_pb.BREAKER_STATE_UNSPECIFIED
        ),
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
        limit=model_limit_message(stats.key, stats.limits),
        in_flight=stats.in_flight,
        effective_concurrency=stats.effective_concurrency,
        paused_until=convert.timestamp(stats.paused_until),
        rate_limited_total=stats.rate_limited_total,
        rate_limited_last_minute=stats.rate_limited_last_minute,
        cost_today_micros=stats.cost_today_micros,
    )


def _may_read_internal() -> bool:
    """Operators read a job's internal error message; a viewer token does not."""
    caller = current()
    return caller is None or caller.role != "viewer"

"""The AdminService servicer: operators' views and repairs (admin token; a viewer token reads
the views, scheduler_service/api/auth.py)."""

from __future__ import annotations

import logging

from scheduler_service.api.admin_views import AdminViews, model_limit_message, route_message
from scheduler_service.api.servicers import Context
from scheduler_service.core.errors import InvalidRequestError
from scheduler_service.core.routes import ModelTier
from scheduler_service.services.flow import checked_key, checked_limits
from scheduler_service.sql.job_stats import redrive_dead_events
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import types_pb2 as types_pb

log = logging.getLogger(__name__)

__all__ = ["AdminServicer"]


class AdminServicer(AdminViews):
    """The views, and the actions an admin token may take."""

    async def CancelJob(
        self, request: job_pb.CancelJobRequest, context: Context
    ) -> job_pb.CancelJobResponse:
        owner, _ = await self._use.jobs.get_any(request.job_id)
        record, outcome = await self._use.jobs.cancel(owner.userId, request.job_id)
        log.info("admin cancelled a job", extra={"action": "admin_cancel", "jobId": record.id})
        return job_pb.CancelJobResponse(
            job=self._messages.of(record, internal=True), outcome=outcome
        )

    async def RetryJob(self, request: admin_pb.RetryJobRequest, context: Context) -> types_pb.Job:
        record = await self._use.jobs.retry(request.job_id)
        log.info(
            "admin retried a job",
            extra={"action": "admin_retry", "jobId": request.job_id, "newJobId": record.id},
        )
        return self._messages.of(record, internal=True)

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
        await self._use.model_keys.put(key, limits)
        log.info(
            "admin set a model limit",
            extra={"action": "admin_model_limit", "provider": key.provider, "model": key.model},
        )
        return admin_pb.PutModelLimitResponse(limit=model_limit_message(key, limits))

    async def PutModelRoute(
        self, request: admin_pb.ModelRoute, context: Context
    ) -> admin_pb.ModelRoute:
        tiers = [ModelTier(t.provider, t.model) for t in request.tiers]
        route = await self._use.model_routes.put(request.job_type, tiers)
        log.info(
            "admin set a model route",
            extra={"action": "admin_model_route", "job_type": request.job_type},
        )
        return route_message(route)

    async def ResetModelBreaker(
        self, request: admin_pb.ResetModelBreakerRequest, context: Context
    ) -> admin_pb.ResetModelBreakerResponse:
        key = checked_key(request.provider, request.model, "platform")
        was_open = await self._use.model_routes.reset(
            key.provider, key.model, request.credential_id
        )
        log.info(
            "admin reset a model breaker",
            extra={"action": "admin_breaker_reset", "provider": key.provider, "model": key.model},
        )
        return admin_pb.ResetModelBreakerResponse(
            breaker_state=admin_pb.BREAKER_STATE_CLOSED, was_open=was_open
        )

    async def ReencryptCredentials(
        self, request: admin_pb.ReencryptCredentialsRequest, context: Context
    ) -> admin_pb.ReencryptCredentialsResponse:
        moved, version = await self._use.credentials.reencrypt_all()
        log.info(
            "admin re-encrypted credentials",
            extra={"action": "admin_reencrypt", "count": moved, "key_version": version},
        )
        return admin_pb.ReencryptCredentialsResponse(reencrypted=moved, key_version=version)

    async def PutUserBudget(
        self, request: admin_pb.PutUserBudgetRequest, context: Context
    ) -> admin_pb.PutUserBudgetResponse:
        budget = await self._use.billing.put_budget(
            request.user_id, request.daily_tokens, request.daily_cost_micros
        )
        log.info("admin set a user budget", extra={"action": "admin_user_budget"})
        return admin_pb.PutUserBudgetResponse(
            user_id=request.user_id,
            daily_tokens=budget.daily_tokens,
            daily_cost_micros=budget.daily_cost_micros,
        )

    async def CancelUserJobs(
        self, request: admin_pb.CancelUserJobsRequest, context: Context
    ) -> admin_pb.CancelUserJobsResponse:
        cancelled, requested = await self._use.jobs.cancel_user_jobs(request.user_id)
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
        redriven = await redrive_dead_events(self._use.uow, ids)
        self._use.outbox.notify()
        log.info("admin redrove dead events", extra={"action": "admin_redrive", "count": redriven})
        return admin_pb.RedriveDeadEventsResponse(redriven=redriven)

    async def AdoptLegacyJobs(
        self, request: admin_pb.AdoptLegacyJobsRequest, context: Context
    ) -> admin_pb.AdoptLegacyJobsResponse:
        adoption = await self._use.legacy.adopt(request.job_type, dry_run=request.dry_run)
        return admin_pb.AdoptLegacyJobsResponse(
            adopted=adoption.adopted, left_to_legacy=adoption.left_to_legacy
        )

"""The admin API's client: the views an admin or viewer token reads
(:class:`AdminViewsClient`), and the actions an admin token takes (:class:`AdminClient`)."""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator
from typing import Any

from aijob.calls import BaseClient
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc as admin_grpc
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import types_pb2

__all__ = ["AdminClient", "AdminViewsClient", "breaker_text"]

#: Adoption and re-encryption touch every row of a kind: they get this many times the deadline.
LONG_CALL = 10


def breaker_text(state: admin_pb.BreakerState) -> str:
    """``open``, ``half-open`` or ``closed``."""
    name = admin_pb.BreakerState.Name(state).removeprefix("BREAKER_STATE_")
    return "closed" if name == "UNSPECIFIED" else name.lower().replace("_", "-")


class AdminViewsClient(BaseClient):
    """The admin API's views (an admin or a viewer token)."""

    _role = "admin"

    def __init__(self, address: str | None = None, **options: Any) -> None:
        super().__init__(address, **options)
        self._stub = admin_grpc.AdminServiceStub(self._channel)

    async def get(self, job_id: str) -> types_pb2.Job:
        return await self._unary(self._stub.GetJob, job_pb.GetJobRequest(job_id=job_id))

    async def stats(self) -> admin_pb.QueueStats:
        return await self._unary(self._stub.GetQueueStats, admin_pb.GetQueueStatsRequest())

    async def usage(
        self, user_id: str, from_date: str = "", to_date: str = ""
    ) -> admin_pb.GetUserUsageResponse:
        request = admin_pb.GetUserUsageRequest(
            user_id=user_id, from_date=from_date, to_date=to_date
        )
        return await self._unary(self._stub.GetUserUsage, request)

    async def list(self, page_size: int = 50, **filters: Any) -> AsyncIterator[types_pb2.Job]:
        """Every job the filters select (AdminListJobsRequest's fields), a page at a time."""
        token = ""
        while True:
            page = await self.page(page_size, token, **filters)
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
        return await self._unary(self._stub.ListJobs, request)

    async def timeline(self, job_id: str) -> admin_pb.JobTimeline:
        request = admin_pb.GetJobTimelineRequest(job_id=job_id)
        return await self._unary(self._stub.GetJobTimeline, request)

    async def tree(self, job_id: str) -> job_pb.GetJobTreeResponse:
        """The tree any job belongs to, root first, with its usage rolled up."""
        return await self._unary(self._stub.GetJobTree, job_pb.GetJobTreeRequest(job_id=job_id))

    async def job_types(self) -> builtins.list[job_pb.JobType]:
        reply = await self._unary(self._stub.ListJobTypes, job_pb.ListJobTypesRequest())
        return list(reply.job_types)

    async def model_limits(self) -> builtins.list[admin_pb.ModelLimit]:
        reply = await self._unary(self._stub.ListModelLimits, admin_pb.ListModelLimitsRequest())
        return list(reply.limits)

    async def model_route(self, job_type: str) -> admin_pb.ModelRoute:
        """The route ``job_type``'s jobs follow now, primary tier first."""
        request = admin_pb.GetModelRouteRequest(job_type=job_type)
        return await self._unary(self._stub.GetModelRoute, request)

    async def audit(self, page_size: int = 50) -> AsyncIterator[admin_pb.AuditEntry]:
        """The audit log, newest first."""
        token = ""
        while True:
            page = await self.audit_page(page_size, token)
            for entry in page.entries:
                yield entry
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def audit_page(
        self, page_size: int = 50, page_token: str = ""
    ) -> admin_pb.ListAuditEntriesResponse:
        """One page of the audit log, newest first."""
        request = admin_pb.ListAuditEntriesRequest(page_size=page_size, page_token=page_token)
        return await self._unary(self._stub.ListAuditEntries, request)


class AdminClient(AdminViewsClient):
    """The admin API: its views and its actions (an admin token)."""

    async def retry(self, job_id: str) -> types_pb2.Job:
        return await self._unary(self._stub.RetryJob, admin_pb.RetryJobRequest(job_id=job_id))

    async def cancel(self, job_id: str) -> job_pb.CancelJobResponse:
        return await self._unary(self._stub.CancelJob, job_pb.CancelJobRequest(job_id=job_id))

    async def cancel_user_jobs(self, user_id: str) -> admin_pb.CancelUserJobsResponse:
        request = admin_pb.CancelUserJobsRequest(user_id=user_id)
        return await self._unary(self._stub.CancelUserJobs, request)

    async def redrive(self, event_ids: builtins.list[str] | None = None) -> int:
        request = admin_pb.RedriveDeadEventsRequest(event_ids=event_ids or [])
        return int((await self._unary(self._stub.RedriveDeadEvents, request)).redriven)

    async def put_model_limit(self, limit: admin_pb.ModelLimit) -> admin_pb.ModelLimit:
        request = admin_pb.PutModelLimitRequest(limit=limit)
        reply: admin_pb.PutModelLimitResponse = await self._unary(self._stub.PutModelLimit, request)
        return reply.limit

    async def put_model_route(
        self, job_type: str, tiers: builtins.list[admin_pb.ModelTier]
    ) -> admin_pb.ModelRoute:
        """Set ``job_type``'s route (no tiers: remove the operator's route)."""
        route = admin_pb.ModelRoute(job_type=job_type, tiers=tiers)
        return await self._unary(self._stub.PutModelRoute, route)

    async def reset_breaker(
        self, provider: str, model: str, credential_id: str = ""
    ) -> admin_pb.ResetModelBreakerResponse:
        request = admin_pb.ResetModelBreakerRequest(
            provider=provider, model=model, credential_id=credential_id
        )
        return await self._unary(self._stub.ResetModelBreaker, request)

    async def put_budget(
        self, user_id: str, daily_tokens: int, daily_cost_micros: int
    ) -> admin_pb.PutUserBudgetResponse:
        request = admin_pb.PutUserBudgetRequest(
            user_id=user_id, daily_tokens=daily_tokens, daily_cost_micros=daily_cost_micros
        )
        return await self._unary(self._stub.PutUserBudget, request)

    async def adopt_legacy(
        self, job_type: str, *, dry_run: bool = False
    ) -> admin_pb.AdoptLegacyJobsResponse:
        """Hand a legacy job type to the engine (or, with ``dry_run``, count what would move)."""
        request = admin_pb.AdoptLegacyJobsRequest(job_type=job_type, dry_run=dry_run)
        return await self._unary(
            self._stub.AdoptLegacyJobs, request, self._calls.timeout_s * LONG_CALL
        )

    async def reencrypt_credentials(self) -> admin_pb.ReencryptCredentialsResponse:
        """Every stored user key moved under the newest credential key."""
        request = admin_pb.ReencryptCredentialsRequest()
        return await self._unary(
            self._stub.ReencryptCredentials, request, self._calls.timeout_s * LONG_CALL
        )

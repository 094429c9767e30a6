"""The runtime protocol's pieces, built together: leasing (Lock and the claim), settlement (how
an attempt's end is settled), the reports' group commit (Heartbeat, SubmitResult, SubmitFailure
and the streams' reports) and key access (ResolveCredential). Each does one thing; this module
only builds them with the limits and policies they share."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler_service.core.budgets import Budget
from scheduler_service.core.cheap_hours import CheapHours
from scheduler_service.core.fairness import RunningCaps
from scheduler_service.core.job_definitions import USER_KEY_MODE
from scheduler_service.core.job_registry import JobRegistry
from scheduler_service.core.model_keys import FlowPolicy
from scheduler_service.core.peak_hours import PeakHours
from scheduler_service.core.prices import DEFAULT_PRICES, PriceTable
from scheduler_service.core.provider_ids import ProviderUserIds
from scheduler_service.core.routes import RouteBook, Router
from scheduler_service.ports import UnitOfWork
from scheduler_service.services.group_commit import GroupCommit, ReportBatcher
from scheduler_service.services.key_access import KeyAccess
from scheduler_service.services.leasing import ClaimPolicy, Leasing
from scheduler_service.services.routing import router_of
from scheduler_service.services.settlement import RetryLimits, Settlement
from scheduler_service.services.user_keys import UserKeyRights

__all__ = ["ReportLimits", "RuntimePieces", "runtime_pieces"]


@dataclass(frozen=True, slots=True)
class ReportLimits:
    """How reports are gathered into group commits, and what one attempt may store."""

    window_s: float = 0.002
    max_batch: int = 200
    max_output_bytes: int = 1024 * 1024
    chunks_per_attempt: int = 1_000


@dataclass(frozen=True, slots=True)
class RuntimePieces:
    leasing: Leasing
    settlement: Settlement
    reports: ReportBatcher
    key_access: KeyAccess
    cheap_hours: CheapHours


def runtime_pieces(
    uow: UnitOfWork,
    registry: JobRegistry,
    *,
    flow: FlowPolicy | None = None,
    prices: PriceTable | None = None,
    budget: Budget | None = None,
    running_caps: RunningCaps | None = None,
    cheap_hours: CheapHours | None = None,
    user_key_runtimes: Sequence[str] = (),
    provider_user_ids: ProviderUserIds | None = None,
    router: Router | None = None,
    retry: RetryLimits | None = None,
    reports: ReportLimits | None = None,
    rng: random.Random | None = None,
) -> RuntimePieces:
    """The pieces on ``uow``; what is not given takes the engine's defaults (no peak window, no
    budget, DeepSeek's prices, no user-key fleet)."""
    flow = flow or FlowPolicy(user_key_mode=USER_KEY_MODE)
    router = router or router_of(
        registry, Router(RouteBook({}, {}), lambda _job_type: None, USER_KEY_MODE)
    )
    cheap_hours = cheap_hours or CheapHours(PeakHours.parse(""), lambda: None)
    reports = reports or ReportLimits()
    settlement = Settlement(
        uow,
        registry,
        prices=prices or PriceTable.parse(DEFAULT_PRICES),
        flow=flow,
        limits=retry or RetryLimits(),
        rng=rng or random.SystemRandom(),
        router=router,
    )
    user_keys = UserKeyRights(user_key_runtimes)
    leasing = Leasing(
        uow,
        registry,
        settlement,
        policy=ClaimPolicy(
            flow, cheap_hours, running_caps=running_caps, budget=budget, router=router
        ),
        user_keys=user_keys,
        provider_user_ids=provider_user_ids or ProviderUserIds(),
    )
    group = GroupCommit(
        settlement,
        uow,
        registry,
        flow,
        chunks_per_attempt=reports.chunks_per_attempt,
        max_output_bytes=reports.max_output_bytes,
    )
    batcher = ReportBatcher(group, window_s=reports.window_s, max_batch=reports.max_batch)
    return RuntimePieces(leasing, settlement, batcher, KeyAccess(uow, user_keys), cheap_hours)

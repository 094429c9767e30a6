"""Leases: Lock, and the claim that dispatch and a create's hand-off run, each lease named for
the model provider and checked against the runtime's rights; a job whose input a lease cannot
carry fails alone instead of ending a stream."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from scheduler_service.core import validation
from scheduler_service.core.budgets import Budget
from scheduler_service.core.cheap_hours import CheapHours
from scheduler_service.core.errors import UnleasableJobError, UserKeyNotAllowedError
from scheduler_service.core.fairness import RunningCaps
from scheduler_service.core.job_definitions import USER_KEY_MODE
from scheduler_service.core.job_registry import JobRegistry
from scheduler_service.core.model_keys import FlowPolicy
from scheduler_service.core.provider_ids import ProviderUserIds
from scheduler_service.core.records import JobError, LeaseGrant, LeasePayload
from scheduler_service.core.routes import Router
from scheduler_service.ports import NewJobRows, Transaction, UnitOfWork
from scheduler_service.services import judging
from scheduler_service.services.reports import FailedAttempt, count_leases, trace_leases
from scheduler_service.services.resuming import resuming
from scheduler_service.services.settlement import Settlement
from scheduler_service.services.user_keys import UserKeyRights
from shared import tracing
from shared.error_codes import ErrorCode

__all__ = ["ClaimPolicy", "Leasing"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ClaimPolicy:
    """What a claim honours besides the queue: per-user running caps, the model keys' limits,
    users' budgets and the cheap hours (replaced whole when the peak windows change)."""

    flow: FlowPolicy
    cheap_hours: CheapHours
    running_caps: RunningCaps | None = None
    budget: Budget | None = None
    #: The model routes and breakers (core/routes.py); None: every job on its own model.
    router: Router | None = None


class Leasing:
    def __init__(
        self,
        uow: UnitOfWork,
        registry: JobRegistry,
        settlement: Settlement,
        *,
        policy: ClaimPolicy,
        user_keys: UserKeyRights,
        provider_user_ids: ProviderUserIds,
    ) -> None:
        self._uow = uow
        self._registry = registry
        self._settlement = settlement
        self.policy = policy
        #: Which runtimes may run user-key jobs and read user keys.
        self._user_keys = user_keys
        #: How a lease names its job's user to the model provider (never the raw id).
        self._provider_user_ids = provider_user_ids

    @property
    def uow(self) -> UnitOfWork:
        return self._uow

    async def lock(self, job_id: str, runtime_instance_id: str) -> LeasePayload:
        validation.job_id(job_id)
        validation.instance_id(runtime_instance_id)

        async def lock(tx: Transaction) -> tuple[LeaseGrant, LeasePayload | JobError]:
            grant = await tx.jobs.lock(job_id, runtime_instance_id)
            payload = (await tx.reads.lease_payloads([grant]))[0]
            if payload.job_type not in self._registry or await tx.reads.left_to_legacy(job_id):
                # A type the legacy system still owns, or one retired: raised here, so the lock
                # rolls back.
                raise UnleasableJobError(
                    job_id, ErrorCode.JOB_TYPE_UNKNOWN, "This kind of job is not run here."
                )
            # Raised inside the transaction: the lock rolls back with it.
            if payload.credential_mode == USER_KEY_MODE and not self._user_keys.for_caller(
                runtime_instance_id
            ):
                raise UserKeyNotAllowedError("this runtime is not allowed to run jobs on user keys")
            tx.job_changed(job_id)
            error = judging.unleasable_error(payload)
            if error is not None:
                await self._set_apart_unleasable(tx, [payload], runtime_instance_id)
                return grant, error
            return grant, (await resuming(tx, self._registry, [payload]))[0]

        grant, payload = await self._uow.run(lock)
        if isinstance(payload, JobError):
            raise UnleasableJobError(job_id, ErrorCode(payload.code), payload.public_message)
        count_leases([grant])
        return self._named(payload)

    def use_provider_user_ids(self, provider_user_ids: ProviderUserIds) -> None:
        """Pseudonymise under this key from now on (the one the database keeps, found at
        start when no key is configured)."""
        self._provider_user_ids = provider_user_ids

    def _named(self, lease: LeasePayload) -> LeasePayload:
        """``lease`` with its user's pseudonym for the model provider."""
        if not self._provider_user_ids.enabled:
            return lease
        return replace(lease, provider_user_id=self._provider_user_ids.of(lease.user_id))

    async def claim(
        self, runtime_instance_id: str, job_types: Sequence[str], limit: int
    ) -> list[LeasePayload]:
        (leases,) = await self._uow.run(
            lambda tx: self.claim_within(tx, job_types, [(runtime_instance_id, limit)])
        )
        return leases

    async def claim_within(
        self,
        tx: Transaction,
        job_types: Sequence[str],
        demands: Sequence[tuple[str, int]],
        *,
        fresh: NewJobRows | None = None,
    ) -> list[list[LeasePayload]]:
        """Leases with their payloads for several runtimes of the same job types, per demand, in
        ``tx``, counted once it commits; with ``fresh``, of the create's jobs not yet written."""
        started = tracing.now_ns()
        if fresh is not None:  # one a lease could not carry waits for the claim of its row
            fresh = [row for row in fresh if judging.leasable_input(row[1], row[2])]
        shares = await self._claim_shares(tx, job_types, demands, fresh)
        granted = [grant for share in shares for grant in share]
        if granted:
            tx.after_commit(lambda: count_leases(granted))
        # The payloads in the same transaction: one connection and one commit per round.
        payloads = iter(await tx.reads.lease_payloads(granted))
        leases = [
            await resuming(
                tx,
                self._registry,
                await self._set_apart_unleasable(tx, [next(payloads) for _ in share], holder),
            )
            for share, (holder, _) in zip(shares, demands, strict=True)
        ]
        if tracing.enabled():
            held = [
                (lease, holder)
                for (holder, _), share in zip(demands, leases, strict=True)
                for lease in share
            ]
            tx.after_commit(lambda: trace_leases(held, started))
        return leases

    async def _set_apart_unleasable(
        self, tx: Transaction, leases: list[LeasePayload], holder: str
    ) -> list[LeasePayload]:
        """``leases`` without those whose input a lease cannot carry (a legacy row, a row written
        by hand): each of those fails alone, in ``tx``, so it can never end a Poll stream or hold
        up the other jobs of its claim."""
        kept: list[LeasePayload] = []
        for lease in leases:
            error = judging.unleasable_error(lease)
            if error is None:
                kept.append(self._named(lease))
                continue
            failed = FailedAttempt(
                lease.job_id,
                lease.attempt_no,
                error,
                retryable=False,
                runtime_instance_id=holder,
                lease_token=lease.lease_token,
            )
            await self._settlement.settle_in(tx, await tx.reads.get(lease.job_id), failed)
            log.warning(
                "a job whose input a lease cannot carry failed",
                extra={"action": "job_unleasable", "jobId": lease.job_id, "code": error.code},
            )
        return kept

    async def _claim_shares(
        self,
        tx: Transaction,
        job_types: Sequence[str],
        demands: Sequence[tuple[str, int]],
        fresh: NewJobRows | None = None,
    ) -> list[list[LeaseGrant]]:
        """Claims for the runtimes allowed user keys and for the others apart, so a user-key
        job only goes to a runtime allowed to run it; in the order of ``demands``. Fresh jobs
        are dealt in one claim (two would deal them twice), with user keys only if all may."""
        allowed = [self._user_keys.for_claim(instance) for instance, _ in demands]
        policy = self.policy
        defer_ms = policy.cheap_hours.defer_ms()
        if all(allowed) or fresh is not None:
            return await tx.jobs.claim_batches(
                job_types,
                demands,
                platform_key_only=not all(allowed),
                running_caps=policy.running_caps,
                flow=policy.flow,
                budget=policy.budget,
                defer_ms=defer_ms,
                fresh=fresh,
                router=policy.router,
            )
        shares: list[list[LeaseGrant]] = [[] for _ in demands]
        for flag in (True, False):
            indexes = [i for i, a in enumerate(allowed) if a is flag]
            if not indexes:
                continue
            claimed = await tx.jobs.claim_batches(
                job_types,
                [demands[i] for i in indexes],
                platform_key_only=not flag,
                running_caps=policy.running_caps,
                flow=policy.flow,
                budget=policy.budget,
                defer_ms=defer_ms,
                router=policy.router,
            )
            for index, share in zip(indexes, claimed, strict=True):
                shares[index] = share
        return shares

    def stream_subscribed(self, runtime_instance_id: str) -> None:
        self._user_keys.stream_subscribed(runtime_instance_id)

    async def release_undelivered(self, lease: LeasePayload, runtime_instance_id: str) -> bool:
        return await self._uow.run(
            lambda tx: tx.jobs.release_undelivered(
                lease.job_id, lease.attempt_no, runtime_instance_id, lease.lease_token
            )
        )

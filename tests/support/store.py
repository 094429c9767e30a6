"""The job store's operations each in a unit of work of its own, for tests that drive the lifecycle
one write at a time (the shape the lifecycle repository had before the unit of work)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.core.lease_tokens import digest
from scheduler_service.core.records import (
    CancelOutcome,
    ExpiredLease,
    HeartbeatOutcome,
    JobRecord,
    LeaseGrant,
    NewJob,
)
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.core.transitions import HEARTBEAT, SUCCEED
from scheduler_service.ports import JobStore, Transaction, UnitOfWork
from scheduler_service.sql import job_statements as sql
from scheduler_service.sql.uow import LeaseTimes, SqlUnitOfWork

__all__ = ["StoreCalls", "UnitCalls"]


class UnitCalls:
    """The job store's operations over any unit of work, one unit each."""

    def __init__(self, uow: UnitOfWork) -> None:
        self.uow = uow

    async def _run(self, name: str, *args: Any, **kwargs: Any) -> Any:
        async def work(tx: Transaction) -> Any:
            operation = getattr(tx.jobs, name)
            return await operation(*args, **kwargs)

        assert hasattr(JobStore, name), name
        return await self.uow.run(work)

    async def row(self, job_id: str) -> dict[str, Any]:
        """The job as a plain row (its record's fields)."""
        job = await self.get(job_id)
        assert job is not None, job_id
        return {f.name: getattr(job, f.name) for f in dataclasses.fields(job)}

    async def legacy_status(self, job_id: str) -> str | None:
        """System A's ``status`` column, where there is one (None in memory)."""
        return None

    async def create(self, job: NewJob) -> None:
        async def work(tx: Transaction) -> None:
            places = await tx.gates.fair_places([job])
            await tx.jobs.create_many([(job, {}, {})], places)

        await self.uow.run(work)

    async def get(self, job_id: str) -> JobRecord | None:
        return await self.uow.read(lambda tx: tx.reads.get(job_id))

    async def lock(self, job_id: str, runtime_instance_id: str) -> LeaseGrant:
        grant: LeaseGrant = await self._run("lock", job_id, runtime_instance_id)
        return grant

    async def extend_lease(
        self,
        job_id: str,
        attempt_no: int,
        runtime_instance_id: str,
        *,
        progress: int | None = None,
        lease_token: str | None = None,
    ) -> HeartbeatOutcome:
        """One HEARTBEAT write on its own (a token, when given, must match)."""
        extra: dict[str, Any] = {} if progress is None else {"progress": progress}
        if lease_token is not None:
            extra["token"] = digest(lease_token)

        async def work(tx: Transaction) -> HeartbeatOutcome:
            await tx.jobs.apply(
                HEARTBEAT, job_id, attempt=attempt_no, holder=runtime_instance_id, **extra
            )
            return await tx.reads.lease_state(job_id)

        return await self.uow.run(work)

    async def keep_alive(self, holders: Iterable[str]) -> int:
        kept: int = await self._run("keep_alive", set(holders))
        return kept

    async def release_undelivered(self, *args: Any) -> bool:
        return bool(await self._run("release_undelivered", *args))

    async def requeue_for_retry(self, *args: Any, **kwargs: Any) -> datetime:
        available_at: datetime = await self._run("requeue_for_retry", *args, **kwargs)
        return available_at

    async def mark_succeeded(
        self,
        job_id: str,
        attempt_no: int,
        *,
        output_hash: str,
        result_idempotency_key: str,
        validated_output: Any = None,
        runtime_instance_id: str | None = None,
    ) -> None:
        """One SUCCEED write on its own."""
        await self.uow.run(
            lambda tx: tx.jobs.apply(
                SUCCEED,
                job_id,
                attempt=attempt_no,
                holder=runtime_instance_id,
                outputHash=output_hash,
                resultIdempotencyKey=result_idempotency_key,
                validatedOutput=validated_output,
            )
        )

    async def mark_failed(self, *args: Any, **kwargs: Any) -> None:
        await self._run("mark_failed", *args, **kwargs)

    async def mark_cancelled(self, *args: Any, **kwargs: Any) -> None:
        await self._run("mark_cancelled", *args, **kwargs)

    async def expire_queued(self, job_id: str) -> None:
        await self._run("expire_queued", job_id)

    async def request_cancellation(self, job_id: str, **kwargs: Any) -> CancelOutcome:
        outcome: CancelOutcome = await self._run("request_cancellation", job_id, **kwargs)
        return outcome

    async def claim_batches(self, *args: Any, **kwargs: Any) -> list[list[LeaseGrant]]:
        shares: list[list[LeaseGrant]] = await self._run("claim_batches", *args, **kwargs)
        return shares

    async def model_congested(self, *args: Any) -> None:
        await self.uow.run(lambda tx: tx.keys.congested(*args))

    async def model_answered(self, *args: Any) -> None:
        await self.uow.run(lambda tx: tx.keys.answered(*args))

    async def find_expired_leases(self, *, limit: int = 100) -> list[ExpiredLease]:
        return await self.uow.read(lambda tx: tx.sweeps.expired_leases(limit=limit))


class StoreCalls(UnitCalls):
    """The same on the SQL unit of work, with a test-only read by status."""

    def __init__(
        self, engine: AsyncEngine, *, lease_ttl_s: float = 60.0, lease_grace_s: float = 30.0
    ) -> None:
        super().__init__(
            SqlUnitOfWork(
                engine, lease=LeaseTimes(round(lease_ttl_s * 1000), round(lease_grace_s * 1000))
            )
        )
        self.engine = engine

    async def legacy_status(self, job_id: str) -> str | None:
        async with self.engine.connect() as conn:
            found = await conn.execute(select(sql.jobs.c.status).where(sql.jobs.c.id == job_id))
            return str(found.scalar_one())

    async def find_by_status(
        self,
        statuses: Iterable[LifecycleStatus],
        *,
        queue_name: str | None = None,
        limit: int = 100,
    ) -> list[JobRecord]:
        """Jobs in ``statuses``, oldest first."""
        c = sql.jobs.c
        query = select(*sql.RECORD_COLUMNS).where(sql.status_in(statuses))
        if queue_name is not None:
            query = query.where(c.queueName == queue_name)
        query = query.order_by(c.createdAt, c.id).limit(limit)
        async with self.engine.connect() as conn:
            return [JobRecord.from_mapping(dict(row._mapping)) for row in await conn.execute(query)]

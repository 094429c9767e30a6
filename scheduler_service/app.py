"""The scheduler's parts wired together, with the background tasks (dispatch, reaper)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service import metrics
from scheduler_service.credentials import CredentialCipher, CredentialStore
from scheduler_service.db.engine import create_engine
from scheduler_service.jobs.service import JobService, Limits
from scheduler_service.jobs.signals import ChangeSignals
from scheduler_service.jobs.stats import queue_stats
from scheduler_service.lifecycle.repository import LifecycleRepository
from scheduler_service.outbox.dispatcher import DispatchWaker, OutboxDispatcher
from scheduler_service.outbox.log import Broadcast
from scheduler_service.protocol.dispatch import Dispatcher
from scheduler_service.protocol.service import RuntimeProtocol
from scheduler_service.registry import JobRegistry, default_registry
from scheduler_service.settings import SchedulerSettings

__all__ = ["SchedulerApp"]

log = logging.getLogger(__name__)


OUTBOX_COALESCE_S = 0.02


@dataclass
class SchedulerApp:
    settings: SchedulerSettings
    engine: AsyncEngine
    registry: JobRegistry
    repository: LifecycleRepository
    protocol: RuntimeProtocol
    jobs: JobService
    dispatcher: Dispatcher
    credentials: CredentialStore
    changes: ChangeSignals
    outbox: OutboxDispatcher
    published: Broadcast
    #: Told whether the database answers (the gRPC health service listens).
    on_health: Callable[[bool], Awaitable[None]] | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)

    @classmethod
    def create(
        cls, settings: SchedulerSettings, registry: JobRegistry | None = None
    ) -> SchedulerApp:
        registry = registry or default_registry()
        engine = create_engine(settings.database_url, pool_size=settings.db_pool_size)
        repository = LifecycleRepository(
            engine, lease_ttl_s=settings.lease_ttl_s, lease_grace_s=settings.lease_grace_s
        )
        protocol = RuntimeProtocol(
            engine, repository, registry, max_output_bytes=settings.max_output_bytes
        )
        changes = ChangeSignals()
        dispatcher = Dispatcher(
            protocol,
            engine,
            poll_interval_s=settings.dispatch_poll_ms / 1000,
            batch_max=settings.dispatch_batch_max,
            on_leased=changes.touch,
        )

        published = Broadcast()
        outbox = OutboxDispatcher(
            engine,
            [DispatchWaker(dispatcher.notify)],
            instance_id=f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}",
            interval_s=settings.outbox_interval_ms / 1000,
            batch=settings.outbox_batch,
            processing_timeout_s=settings.outbox_processing_timeout_s,
            backoff_base_ms=settings.outbox_backoff_ms,
            on_published=published.fire,
            stall_after_claim_s=settings.fault_outbox_stall_ms / 1000,
        )

        def enqueued() -> None:
            dispatcher.notify()
            # Subscribers can wait a few milliseconds; the lease dispatch on this replica
            # cannot, so the outbox round comes after it and takes the burst's events at once.
            outbox.notify_soon(OUTBOX_COALESCE_S)

        def cancel_requested(job_id: str) -> None:
            dispatcher.push_cancel(job_id)
            changes.touch(job_id)

        jobs = JobService(
            engine,
            repository,
            registry,
            limits=Limits(
                max_active_jobs_per_user=settings.max_active_jobs_per_user,
                daily_job_quota_per_user=settings.daily_job_quota_per_user,
                max_snapshot_bytes=settings.max_snapshot_bytes,
            ),
            on_enqueued=enqueued,
            on_cancel_requested=cancel_requested,
            handoff=dispatcher.offer_within,
        )
        key = settings.credential_key.get_secret_value()
        credentials = CredentialStore(engine, CredentialCipher.from_base64(key) if key else None)
        return cls(
            settings,
            engine,
            registry,
            repository,
            protocol,
            jobs,
            dispatcher,
            credentials,
            changes,
            outbox,
            published,
        )

    async def start(self) -> None:
        self.dispatcher.start()
        self.outbox.start()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._reap_forever(), name="reaper"))
        self._tasks.append(loop.create_task(self._watch_database(), name="health"))

    async def stop(self) -> None:
        """Let the background loops finish what they are doing (a cancel in the middle of a
        statement could leave a connection mid-transaction), then close the pool."""
        self._stopping.set()
        await self.dispatcher.stop()
        await self.outbox.stop()
        _done, late = await asyncio.wait(self._tasks, timeout=10) if self._tasks else (set(), set())
        for task in late:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.engine.dispose()

    async def _pause(self, seconds: float) -> bool:
        """Sleep between rounds; False once the app is stopping."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), timeout=seconds)
        return not self._stopping.is_set()

    async def _watch_database(self) -> None:
        """Report database reachability to health, and refresh the gauges while it answers."""
        healthy: bool | None = None
        while not self._stopping.is_set():
            try:
                async with self.engine.connect() as conn:
                    await conn.execute(text("SELECT 1"))
                now_healthy = True
            except Exception:
                now_healthy = False
            if now_healthy != healthy:
                healthy = now_healthy
                log.log(
                    logging.INFO if healthy else logging.ERROR,
                    "database reachable" if healthy else "database unreachable",
                    extra={"action": "db_health", "healthy": healthy},
                )
                if self.on_health is not None:
                    await self.on_health(healthy)
            if healthy:
                with contextlib.suppress(Exception):
                    metrics.publish_stats(await queue_stats(self.engine))
            if not await self._pause(self.settings.health_interval_s):
                return

    async def _reap_forever(self) -> None:
        while await self._pause(self.settings.reaper_interval_s):
            try:
                await self.protocol.reap_once()
            except Exception:
                # The database may be briefly unreachable; the next sweep tries again.
                log.exception("reaper sweep failed", extra={"action": "reaper_error"})

"""The scheduler's parts wired together, with the background tasks (dispatch, reaper)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduler_service.core.cheap_hours import CheapHours
from scheduler_service.core.commands import JobLimits
from scheduler_service.core.errors import SchedulerError
from scheduler_service.core.events import EventType
from scheduler_service.core.identity import InstanceOwners
from scheduler_service.core.job_definitions import USER_KEY_MODE
from scheduler_service.core.job_registry import JobRegistry, default_registry
from scheduler_service.core.provider_ids import ProviderUserIds
from scheduler_service.ports import Wakeups
from scheduler_service.services import metrics
from scheduler_service.services.billing import Billing
from scheduler_service.services.dispatch import LeaseDispatcher
from scheduler_service.services.flow import ModelKeys
from scheduler_service.services.group_commit import ReportBatcher
from scheduler_service.services.jobs import JobService
from scheduler_service.services.key_access import KeyAccess
from scheduler_service.services.leasing import Leasing
from scheduler_service.services.liveness import LeaseKeeper
from scheduler_service.services.loops import EveryInterval, RoundLoop
from scheduler_service.services.output_hub import OutputHub
from scheduler_service.services.reaper import Reaper
from scheduler_service.services.routing import ModelRoutes, router_of
from scheduler_service.services.runtime_pieces import ReportLimits, RuntimePieces, runtime_pieces
from scheduler_service.services.session import PollSessions
from scheduler_service.services.settlement import RetryLimits, Settlement
from scheduler_service.services.watch_hub import WatchHub
from scheduler_service.sql.audit import AuditLog
from scheduler_service.sql.credentials import CredentialCipher, CredentialStore
from scheduler_service.sql.db.clock import DatabaseClock
from scheduler_service.sql.db.engine import create_engine, is_sqlite
from scheduler_service.sql.db.failover import WriterChoice, parse_nodes
from scheduler_service.sql.engine_secrets import PROVIDER_USER_ID_KEY, engine_secret
from scheduler_service.sql.event_log import EventHub
from scheduler_service.sql.job_stats import live_queue_stats
from scheduler_service.sql.legacy_adoption import LegacyAdoption
from scheduler_service.sql.outbox_dispatcher import (
    DispatchWaker,
    OutboxDispatcher,
    undelivered_types,
)
from scheduler_service.sql.uow import LeaseTimes, SqlUnitOfWork
from scheduler_service.wiring.settings import SchedulerSettings, model_router

__all__ = ["SchedulerApp"]

log = logging.getLogger(__name__)

#: Subscribers can wait a few milliseconds; the lease dispatch on this replica cannot, so after a
#: create the outbox round comes this much later and takes a burst's events at once.
OUTBOX_COALESCE_S = 0.02


@dataclass
class SchedulerApp:
    settings: SchedulerSettings
    uow: SqlUnitOfWork
    registry: JobRegistry
    #: Lock, and the claim that dispatch and a create's hand-off run.
    leasing: Leasing
    reaper: Reaper
    jobs: JobService
    dispatcher: LeaseDispatcher
    polls: PollSessions
    reports: ReportBatcher
    keeper: LeaseKeeper
    credentials: CredentialStore
    watch_hub: WatchHub
    outbox: OutboxDispatcher
    event_hub: EventHub
    legacy: LegacyAdoption
    #: The database's now without a query (sampled each reaper sweep).
    db_clock: DatabaseClock = field(default_factory=DatabaseClock)
    #: Told whether the database answers (the gRPC health service listens).
    on_health: Callable[[bool], Awaitable[None]] | None = None
    #: The ordered database nodes, when failover is configured.
    writer: WriterChoice | None = None
    health_engine: AsyncEngine | None = None
    #: Which runtime token owns each instance id on this replica.
    owners: InstanceOwners = field(default_factory=InstanceOwners)
    #: The StreamOutput callers' feeds.
    output_hub: OutputHub = field(init=False)
    #: How a failed attempt ends (the reaper's, a report's), and what a usage costs.
    settlement: Settlement = field(init=False)
    #: ResolveCredential.
    key_access: KeyAccess = field(init=False)
    #: The model keys' limits and state, as operators set and read them.
    model_keys: ModelKeys = field(init=False)
    model_routes: ModelRoutes = field(init=False)
    #: Users' budgets and the usage report.
    billing: Billing = field(init=False)
    #: Every admin action, as recorded.
    audit_log: AuditLog = field(init=False)
    #: Every background loop, in the order they start (and stop).
    loops: list[RoundLoop] = field(default_factory=list)
    _healthy: bool | None = None

    @property
    def engine(self) -> AsyncEngine:
        return self.uow.engine

    @property
    def cheap_hours(self) -> CheapHours:
        """When off-peak jobs wait (core/cheap_hours.py), as the claim judges it."""
        return self.leasing.policy.cheap_hours

    @cheap_hours.setter
    def cheap_hours(self, cheap_hours: CheapHours) -> None:
        self.leasing.policy.cheap_hours = cheap_hours

    @property
    def runtime(self) -> RuntimePieces:
        """The runtime protocol's pieces, together."""
        return RuntimePieces(
            self.leasing, self.settlement, self.reports, self.key_access, self.cheap_hours
        )

    @classmethod
    def create(
        cls, settings: SchedulerSettings, registry: JobRegistry | None = None
    ) -> SchedulerApp:
        registry = registry or default_registry()
        wakeups = Wakeups()
        db = settings.db
        writer = (
            WriterChoice(
                db.url,
                parse_nodes(db.failover_hosts),
                causal_reads=db.causal_reads,
                read_timeout_s=db.read_timeout_s,
            )
            if (db.failover_hosts or db.causal_reads) and not is_sqlite(db.url)
            else None
        )
        timeouts = {"read_timeout_s": db.read_timeout_s, "connect_timeout_s": db.connect_timeout_s}
        uow = SqlUnitOfWork(
            create_engine(
                db.url,
                pool_size=db.pool_size,
                ping_after_idle_s=db.ping_after_idle_s,
                writer=writer,
                **timeouts,
            ),
            wakeups,
            lease=LeaseTimes(
                ttl_ms=round(settings.lease.ttl_s * 1000),
                grace_ms=round(settings.lease.grace_s * 1000),
            ),
        )
        #: The database's now, sampled by the reaper: when peak windows begin and end.
        db_clock = DatabaseClock()
        router = router_of(registry, model_router(settings))
        runtime = runtime_pieces(
            uow,
            registry,
            flow=settings.flow,
            prices=settings.prices,
            budget=settings.budget,
            running_caps=settings.running_caps,
            cheap_hours=CheapHours(settings.peak, db_clock.now),
            user_key_runtimes=settings.user_key_runtimes,
            provider_user_ids=settings.provider_user_ids,
            router=router,
            retry=RetryLimits(
                settings.limits.max_retry_after_ms, settings.limits.max_waived_attempts
            ),
            reports=ReportLimits(
                settings.reports.window_s,
                settings.reports.max_batch,
                settings.limits.max_output_bytes,
                settings.output_chunks_per_attempt,
            ),
        )
        watch_hub = WatchHub(uow, interval_s=settings.streams.watch_poll_s)
        output_hub = OutputHub(uow, interval_s=settings.streams.watch_poll_s)
        dispatcher = LeaseDispatcher(
            runtime.leasing,
            poll_interval_s=settings.dispatch.poll_interval_s,
            batch_max=settings.dispatch.batch_max,
            on_leased=watch_hub.touch,
            # Longer than a lease and its grace: a runtime that keeps losing leases stays struck.
            strike_heal_s=2 * (settings.lease.ttl_s + settings.lease.grace_s),
        )
        event_hub = EventHub(uow, interval_s=settings.outbox.events_poll_s)
        sinks = [DispatchWaker(dispatcher.notify, dispatcher.dispatched_here)]
        # An event no sink takes is written published (sql/outbox_writer.py): a completion, today.
        published_at_write = undelivered_types(sinks)
        uow.published_at_write = published_at_write
        outbox = OutboxDispatcher(
            uow,
            sinks,
            instance_id=f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}",
            interval_s=settings.outbox.interval_s,
            batch=settings.outbox.batch,
            processing_timeout_s=settings.outbox.processing_timeout_s,
            backoff_base_ms=round(settings.outbox.backoff_s * 1000),
            on_published=event_hub.notify,
        )
        wakeups.enqueuing = dispatcher.enqueuing
        wakeups.dispatch = dispatcher.enqueued

        def event_written(event_type: EventType) -> None:
            if event_type in published_at_write:
                event_hub.notify()  # already in the log: only its readers to wake
            elif event_type is EventType.ENQUEUE:
                outbox.notify_soon(OUTBOX_COALESCE_S)
            else:
                outbox.notify()

        wakeups.outbox = event_written
        wakeups.job_changed = functools.partial(_touch_both, watch_hub, output_hub)
        wakeups.output_written = output_hub.written
        wakeups.job_ended = dispatcher.forget
        wakeups.cancel_requested = dispatcher.push_cancel
        jobs = JobService(
            uow,
            registry,
            limits=JobLimits(
                max_active_jobs_per_user=settings.limits.max_active_jobs_per_user,
                daily_job_quota_per_user=settings.limits.daily_job_quota_per_user,
                max_snapshot_bytes=settings.limits.max_snapshot_bytes,
                off_peak_deadline_s=settings.off_peak_deadline_s,
                tree=settings.limits.trees,
                warmup=settings.limits.warmup,
            ),
            handoff=dispatcher.offer_within,
            budget=settings.budget,
            create_window_s=settings.create_batch_window_ms / 1000,
            create_batch_max=settings.create_batch_max,
            clock=db_clock.now,
        )
        wakeups.children_ended = jobs.trees.children_ended
        reports = runtime.reports
        polls = PollSessions(
            dispatcher,
            registry,
            reports,
            max_streams=settings.streams.max_poll_streams,
            subscribe_timeout_s=settings.streams.poll_subscribe_timeout_s,
            max_streams_per_token=settings.streams.max_streams_per_token,
            max_slots=settings.streams.max_slots_per_stream,
        )
        cipher = CredentialCipher.from_settings(
            settings.credential_key.get_secret_value(), settings.credential_keys.get_secret_value()
        )
        credentials = CredentialStore(uow, cipher)
        app = cls(
            settings,
            uow,
            registry,
            runtime.leasing,
            Reaper(
                uow,
                runtime.settlement,
                on_reaped=dispatcher.lease_expired,
                job_types=registry.job_types(),
                budget=settings.budget,
                output_retention_s=settings.output_retention_s,
            ),
            jobs,
            dispatcher,
            polls,
            reports,
            LeaseKeeper(
                uow,
                dispatcher,
                interval_s=settings.lease.keep_alive_interval_s,
                alive_s=settings.lease.stream_alive_s,
            ),
            credentials,
            watch_hub,
            outbox,
            event_hub,
            LegacyAdoption(uow, registry, answer_query=settings.legacy_answer_query),
        )
        app.writer = writer
        app.db_clock = db_clock
        app.output_hub = output_hub
        app.settlement = runtime.settlement
        app.key_access = runtime.key_access
        app.model_keys = ModelKeys(uow, settings.flow)
        app.model_routes = ModelRoutes(uow, registry, router)
        app.billing = Billing(uow, settings.budget, USER_KEY_MODE)
        app.audit_log = AuditLog(uow)
        # Its own connection: a pool that load has exhausted must not read as an outage. Pinged
        # before every check: a connection left over from before an outage must not fail one.
        app.health_engine = create_engine(
            db.url, pool_size=1, ping_after_idle_s=0, writer=writer, **timeouts
        )
        return app

    def _background(self) -> list[RoundLoop]:
        """The loops, each started, stopped and failing the same way (services/loops.py):
        dispatch, the lease keeper, the outbox, the watchers' and subscribers' hubs, the reaper
        (which also prunes idle gate rows), the health check and the gauges."""
        settings = self.settings
        return [
            self.dispatcher,
            self.keeper,
            self.outbox,
            self.watch_hub,
            self.output_hub,
            self.event_hub,
            EveryInterval("reaper", settings.lease.reaper_interval_s, self._reap),
            EveryInterval(
                "health", settings.db.health_interval_s, self._check_database, at_start=True
            ),
            EveryInterval(
                "gauges", settings.metrics.interval_s, self._refresh_gauges, at_start=True
            ),
        ]

    async def start(self) -> None:
        # Which schema the writes are built for (the legacy status column, or contracted), and
        # the database's clock (peak windows).
        with contextlib.suppress(SchedulerError):
            await self.legacy.notice_schema()
            await self._sample_db_clock()
        await self._provider_user_ids()
        self.loops = self._background()
        for loop in self.loops:
            loop.start()

    async def _provider_user_ids(self) -> None:
        """With pseudonyms on and no key configured, the key the database keeps (made by the
        first replica to start): a deployment that forgot the secret still isolates its users
        at the provider."""
        settings = self.settings
        if settings.provider_user_id != "on" or settings.provider_user_id_key.get_secret_value():
            return
        try:
            key = await engine_secret(self.engine, PROVIDER_USER_ID_KEY)
        except SQLAlchemyError:
            log.warning(
                "the provider user-id key could not be read; calls carry no user id until a "
                "restart finds it",
                extra={"action": "provider_user_id_key_unavailable"},
            )
            return
        self.leasing.use_provider_user_ids(ProviderUserIds(key))

    async def stop(self) -> None:
        """Let the background loops finish what they are doing (a cancel in the middle of a
        statement could leave a connection mid-transaction), then close the pool."""
        await self.reports.drain()
        await self.jobs.drain()
        for loop in self.loops:
            await loop.stop()
        await self.engine.dispose()
        if self.health_engine is not None:
            await self.health_engine.dispose()

    async def _back_to_preferred_writer(self) -> None:
        """Once a node earlier in the list is ready again, empty the pool: new connections go to
        it (those in use finish where they are)."""
        writer = self.writer
        if writer is None or writer.current is None:
            return
        with contextlib.suppress(Exception):
            preferred = await writer.preferred()
            if preferred is not None and preferred != writer.current:
                log.warning(
                    "database writer going back to %s",
                    preferred,
                    extra={"action": "db_writer_back", "node": str(preferred)},
                )
                await self.engine.dispose()
                if self.health_engine is not None:
                    await self.health_engine.dispose()

    async def _check_database(self) -> None:
        """Report database reachability to health, and gate the unit of work on it: while a
        check fails (refused, silent, or the schema gone), database-backed RPCs and loops are
        answered UNAVAILABLE at once instead of each waiting for its own timeout."""
        healthy = await self._database_answers()
        await self._back_to_preferred_writer()
        if healthy == self._healthy:
            return
        if healthy and self._healthy is False:
            # Every pooled connection went through the outage: none is handed out unchecked.
            await self.engine.dispose()
        self._healthy = healthy
        self.polls.database_reachable = healthy
        self.uow.reachable = healthy
        log.log(
            logging.INFO if healthy else logging.ERROR,
            "database reachable" if healthy else "database unreachable",
            extra={"action": "db_health", "healthy": healthy},
        )
        if self.on_health is not None:
            await self.on_health(healthy)

    async def _database_answers(self) -> bool:
        engine = self.health_engine or self.engine
        try:
            async with asyncio.timeout(self.settings.db.health_timeout_s):
                async with engine.connect() as conn:
                    await conn.execute(_SCHEMA_PROBE)
        except Exception:
            # A cancelled read leaves its connection unusable: start the next check afresh.
            with contextlib.suppress(Exception):
                await engine.dispose()
            return False
        return True

    async def _refresh_gauges(self) -> None:
        """The gauges counted in the database, on their own period: the health check may run
        every fraction of a second (failover), and counting there would tax every node."""
        if not self.polls.database_reachable:
            return
        defer_ms = self.cheap_hours.defer_ms()
        metrics.publish_stats(await live_queue_stats(self.uow, defer_ms))
        metrics.publish_model_keys(await self.model_keys.stats())
        metrics.publish_breakers(await self.model_routes.open_keys())

    async def _sample_db_clock(self) -> None:
        self.db_clock.sampled(await self.uow.read(lambda tx: tx.reads.clock()))

    async def _reap(self) -> None:
        await self._sample_db_clock()
        await self.reaper.reap_once()
        await self.legacy.take_in_recent()


#: The health check reads the tables the scheduler cannot work without (a database that lost
#: its schema answers SELECT 1 but nothing else), without reading a row.
_SCHEMA_PROBE = text("SELECT 1 FROM AiAnalysisJob, OutboxEvent LIMIT 0")


def _touch_both(watch_hub: WatchHub, output_hub: OutputHub, job_id: str) -> None:
    """A job changed here: its watchers and its output callers hear of it."""
    watch_hub.touch(job_id)
    output_hub.touch(job_id)

"""Scheduler settings, read from the environment (prefix ``AIJOB_``) by pydantic-settings.

The environment is flat (``AIJOB_LEASE_TTL_S``, ``AIJOB_DISPATCH_POLL_MS``...) and its names are
part of the deployment contract, so the fields below keep them. The code reads settings by concern
instead (``settings.lease``, ``settings.dispatch``...): small frozen groups in which every
duration is in seconds, converted once here whatever unit its variable is written in.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from scheduler_service.core.breakers import BreakerPolicy
from scheduler_service.core.budgets import Budget
from scheduler_service.core.fairness import RunningCaps
from scheduler_service.core.job_definitions import USER_KEY_MODE
from scheduler_service.core.model_keys import FlowPolicy, ModelKeyLimits
from scheduler_service.core.peak_hours import DEEPSEEK_PEAK_HOURS, PeakHours
from scheduler_service.core.prices import DEFAULT_PRICES, PriceTable
from scheduler_service.core.provider_ids import ProviderUserIds, key_length_problem
from scheduler_service.core.retry_policy import MAX_WAIVED_ATTEMPTS
from scheduler_service.core.routes import RouteBook, Router, parse_routes
from scheduler_service.core.trees import TreeLimits
from scheduler_service.core.warmup import WarmupPolicy
from scheduler_service.wiring.setting_groups import (
    DatabaseSettings,
    DispatchSettings,
    LeaseSettings,
    LimitSettings,
    MetricsSettings,
    OutboxSettings,
    ReportSettings,
    StreamSettings,
    TlsSettings,
)
from shared.config import DEV_TOKENS_FILE, comma_list, split_commas
from shared.model_catalogue import ACCOUNT_CONCURRENCY, DEEPSEEK

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./aijob.db"


class SchedulerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AIJOB_", extra="ignore")

    #: SQLAlchemy URL; the default is a SQLite file beside the working directory.
    database_url: str = DEFAULT_DATABASE_URL
    #: host:port the gRPC server listens on.
    listen: str = "127.0.0.1:50051"
    #: Connections the scheduler keeps to MySQL.
    db_pool_size: int = Field(default=20, ge=1, le=500)
    #: Lease length granted by a lock or a heartbeat.
    lease_ttl_s: float = Field(default=60.0, gt=0)
    #: How long past lockUntil the reaper waits before taking a lease back.
    lease_grace_s: float = Field(default=30.0, ge=0)
    #: Reaper period.
    reaper_interval_s: float = Field(default=5.0, gt=0)
    #: How often dispatch looks for work it was not told about (other replicas, ended backoffs).
    dispatch_poll_ms: int = Field(default=250, ge=10, le=5_000)
    #: Most leases claimed for one stream in one statement.
    dispatch_batch_max: int = Field(default=64, ge=1, le=1_000)
    #: Largest output_json accepted by SubmitResult.
    max_output_bytes: int = Field(default=1024 * 1024, ge=1024)
    #: Largest gRPC message the server receives.
    max_receive_message_bytes: int = Field(default=4 * 1024 * 1024, ge=64 * 1024)
    #: host:port of the Prometheus metrics endpoint; empty turns it off.
    metrics_listen: str = "127.0.0.1:9464"
    #: How often the scheduler checks its database for the health service.
    health_interval_s: float = Field(default=0.5, gt=0)
    #: A health check not answered within this is a failed one: health goes NOT_SERVING and
    #: database-backed RPCs answer UNAVAILABLE at once until a check passes again.
    health_timeout_s: float = Field(default=1.5, gt=0)
    #: The driver's read timeout: a statement on a connection that stopped answering without
    #: closing (a silent partition) fails after this, and the connection is dropped.
    db_read_timeout_s: float = Field(default=30.0, gt=0)
    #: How long opening a database connection may take.
    db_connect_timeout_s: float = Field(default=5.0, gt=0)
    #: A pooled connection idle this long is pinged before it is used (0: before every use);
    #: one returned to the pool more recently is used as it is (scheduler_service/sql/db/engine.py).
    db_ping_after_idle_s: float = Field(default=0.5, ge=0)
    #: How often the gauges counted in the database (jobs queued and running, the outbox's
    #: backlog, the model keys) are refreshed: apart from the health check, which a failover
    #: setup runs every fraction of a second.
    metrics_interval_s: float = Field(default=10.0, gt=0)
    #: Serve gRPC server reflection (grpcurl list/describe).
    reflection: bool = True
    #: Reflection requests (anonymous) this server answers per second on average, and at once.
    reflection_rate_per_s: float = Field(default=50.0, gt=0)
    reflection_burst: int = Field(default=200, ge=1)
    #: Bearer tokens per role, comma-separated. With none set on a loopback address the server
    #: generates a set and writes it to ``dev_tokens_file``; elsewhere it refuses to start.
    runtime_tokens: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    service_tokens: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    admin_tokens: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    #: Tokens that read every admin view and change nothing. Any token may be named:
    #: ``name=token`` (the name is what the audit log records).
    viewer_tokens: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    dev_tokens_file: str = DEV_TOKENS_FILE
    #: Runtime tokens bound to an identity, comma-separated ``<instance-id prefix>=<token>``: a
    #: call with one acts only for runtime instances whose id starts with the prefix.
    runtime_identities: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    #: Instance-id prefixes of the runtimes allowed to run user-key jobs and read user keys,
    #: comma-separated; empty allows every runtime.
    user_key_runtimes: Annotated[list[str], NoDecode] = Field(default_factory=list)
    #: TLS: certificate and key of the server; with a client CA, clients must present a
    #: certificate it signed (mutual TLS).
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""
    #: Per-user limits on CreateJob: jobs queued or running at once, and jobs created per UTC day.
    max_active_jobs_per_user: int = Field(default=100, ge=1)
    #: Job trees: levels below a root, children per parent, the most a create may ask for as
    #: ``max_parallel``, and the items (quiz questions) one model call writes before a job of
    #: a type that splits is split into children.
    tree_max_depth: int = Field(default=3, ge=1, le=10)
    tree_max_children: int = Field(default=1_000, ge=1, le=100_000)
    tree_max_parallel: int = Field(default=100, ge=1)
    quiz_questions_per_call: int = Field(default=10, ge=1, le=50)
    #: Warm before fan-out (core/warmup.py): jobs of a user whose prompts start with the same
    #: snapshot wait at most this long (seconds; 0: never) for the first of them to get its
    #: first token, so that the provider has stored the shared prefix; snapshots shorter than
    #: the minimum (canonical JSON bytes) hold no prefix the provider would store.
    warmup_s: float = Field(default=2.0, ge=0, le=60)
    warmup_min_snapshot_bytes: int = Field(default=4096, ge=0)
    #: Jobs of one user running at once across the fleet (0: no cap); dispatch leaves the rest
    #: queued. Per-user overrides: ``user=N`` pairs, comma-separated (``nightly-batch=5``).
    max_running_per_user: int = Field(default=0, ge=0)
    #: Default limits of a model key no operator set with AdminService.PutModelLimit (0: none):
    #: calls at once, requests and tokens per minute, shared by every replica and runtime.
    model_max_concurrency: int = Field(default=0, ge=0)
    model_requests_per_minute: int = Field(default=0, ge=0)
    model_tokens_per_minute: int = Field(default=0, ge=0)
    #: A platform-wide cap on what one model key may cost per UTC day (micro-units; 0: none).
    model_daily_cost_micros: int = Field(default=0, ge=0)
    #: The price table, ``model=prompt/cached/completion[:peak prompt/cached/completion]`` in
    #: micro-units per million tokens (prompt tokens that missed the context cache, that hit it,
    #: completion tokens), off-peak then peak.
    model_prices: str = DEFAULT_PRICES
    #: The provider's peak windows (core/peak_hours.py): days, times, ``@`` time zone; empty:
    #: no peak. A call is priced by the window its attempt started in.
    peak_hours: str = DEEPSEEK_PEAK_HOURS
    #: Local dates (YYYY-MM-DD, comma-separated) with no peak window: the provider's holidays.
    off_peak_dates: str = ""
    #: The secret a job's user id is pseudonymised under for the model provider (DeepSeek's
    #: user_id, provider_ids.py); the same on every replica, at least 32 bytes so that a pseudonym
    #: cannot be guessed back to its user. Unset: calls carry no user id (make run makes one).
    provider_user_id_key: SecretStr = SecretStr("")
    #: ``off``: never send a user id, even with a key.
    provider_user_id: Literal["on", "off"] = "on"
    #: An off-peak job's schedule-to-start deadline when its create names none (seconds).
    off_peak_deadline_s: float = Field(default=6 * 3600, gt=0, le=30 * 86_400)
    #: How long an ended job's output chunks are kept for StreamOutput callers still reading
    #: (seconds); its output is in its result.
    output_retention_s: float = Field(default=300, ge=0, le=30 * 86_400)
    #: Output chunks one attempt may store; past it, its runtime's chunks are refused
    #: (RESOURCE_EXHAUSTED) and its callers get the rest with the result.
    output_chunks_per_attempt: int = Field(default=1_000, ge=1, le=100_000)
    #: Each user's daily budget, unless an operator set theirs (AdminService.PutUserBudget):
    #: tokens (prompt plus completion) and cost in micro-units; 0 is no limit.
    user_daily_tokens: int = Field(default=0, ge=0)
    user_daily_cost_micros: int = Field(default=0, ge=0)
    #: Calls at once a key without a concurrency limit starts at, doubling per round of
    #: successes until the provider pushes back (0: unlimited until then).
    model_initial_concurrency: int = Field(default=4, ge=0)
    #: "documented": a platform key that neither an operator nor AIJOB_MODEL_MAX_CONCURRENCY
    #: limited takes the calls at once DeepSeek documents per account and model
    #: (shared/model_catalogue.py: 2,500 Flash, 500 Pro); "off": no limit until congestion.
    model_account_concurrency: Literal["documented", "off"] = "documented"
    #: A time to first token above this many times the key's baseline (its fastest of the last
    #: minutes), and more than 100 ms above it, halves the key's concurrency, as a 429 does (0:
    #: latency is not read).
    model_latency_tolerance: float = Field(default=1.5, ge=0)
    #: Model routes by job type, ``job_type=provider/model,provider/model;...``, primary first
    #: (core/routes.py); a type not named has its definition's model alone. An operator's
    #: AdminService.PutModelRoute overrides a type's.
    model_routes: str = ""
    #: A model key's circuit breaker (core/breakers.py): consecutive provider failures (5xx,
    #: connection errors, timeouts) that open it, and how long it stays open before one probe.
    breaker_failures: int = Field(default=5, ge=1, le=1_000)
    breaker_cool_down_s: float = Field(default=30.0, gt=0, le=86_400)
    max_running_per_user_overrides: Annotated[dict[str, int], NoDecode] = Field(
        default_factory=dict
    )
    daily_job_quota_per_user: int = Field(default=10_000, ge=1)
    #: Largest snapshot (canonical JSON bytes) CreateJob accepts.
    max_snapshot_bytes: int = Field(default=1024 * 1024, ge=1024)
    #: Concurrent authenticated RPCs (streams included) the server runs; more are refused with
    #: RESOURCE_EXHAUSTED. Anonymous calls (health, reflection) never count against it.
    max_concurrent_rpcs: int = Field(default=10_000, ge=1)
    #: Concurrent anonymous calls (health checks and Watch streams, reflection); a pool of its
    #: own, so that no number of them can take capacity from authenticated callers.
    max_anonymous_rpcs: int = Field(default=100, ge=1)
    #: HTTP/2 streams one connection may open at once.
    max_concurrent_streams: int = Field(default=1_000, ge=1)
    #: Runtime Poll streams this replica holds at once (subscribed or still subscribing); more
    #: are refused with RESOURCE_EXHAUSTED TOO_MANY_STREAMS, so that however many streams come,
    #: max_concurrent_rpcs minus this many RPCs stay free for everything else.
    max_poll_streams: int = Field(default=1_000, ge=1)
    #: WatchJob and SubscribeEvents streams one token may hold open on this replica.
    max_watch_streams_per_token: int = Field(default=5_000, ge=1)
    max_subscribe_streams_per_token: int = Field(default=100, ge=1)
    #: Poll streams one runtime token may hold open on this replica (TOO_MANY_STREAMS beyond).
    max_streams_per_token: int = Field(default=1_000, ge=1)
    #: Largest ``slots`` a Poll subscribe may ask for (leases one stream holds at once).
    max_slots_per_stream: int = Field(default=256, ge=1, le=1_000)
    #: A Poll stream that has not subscribed within this long is closed (INVALID_ARGUMENT).
    poll_subscribe_timeout_s: float = Field(default=10.0, gt=0)
    #: How often WatchJob looks for changes made through other replicas.
    watch_poll_ms: int = Field(default=250, ge=10, le=10_000)
    #: Outbox dispatcher: round period, batch size, how long a claim may stay unfinished before
    #: the event returns to pending, and the first retry delay of a failed delivery (doubling).
    outbox_interval_ms: int = Field(default=200, ge=10, le=60_000)
    outbox_batch: int = Field(default=100, ge=1, le=1_000)
    outbox_processing_timeout_s: float = Field(default=60.0, gt=0)
    outbox_backoff_ms: int = Field(default=1_000, ge=1)
    #: How often SubscribeEvents looks for events published by other replicas.
    events_poll_ms: int = Field(default=200, ge=10, le=10_000)
    #: AES-256-GCM key (base64, 32 bytes) that encrypts users' model keys at rest (version 1).
    credential_key: SecretStr = SecretStr("")
    #: More keys for rotation, comma-separated ``version=base64`` pairs: the highest version
    #: encrypts new writes, every version listed still decrypts (AdminService.
    #: ReencryptCredentials moves every row to the highest).
    credential_keys: SecretStr = SecretStr("")

    #: Other database nodes, comma-separated host:port, tried in order after the URL's host:
    #: every replica writes through the first reachable and ready one (docs/operations/galera.md).
    database_failover_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    #: Causal reads on Galera (wsrep_sync_wait=3), for replicas writing through different nodes.
    database_causal_reads: bool = False

    @field_validator(
        "runtime_tokens",
        "service_tokens",
        "admin_tokens",
        "viewer_tokens",
        "runtime_identities",
        "user_key_runtimes",
        "database_failover_hosts",
        mode="before",
    )
    @classmethod
    def _split_tokens(cls, value: object) -> object:
        return comma_list(value)

    @field_validator("max_running_per_user_overrides", mode="before")
    @classmethod
    def _user_caps(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        caps: dict[str, int] = {}
        for pair in split_commas(value):
            user, sep, cap = pair.rpartition("=")
            if not sep or not user or not cap.isdigit():
                raise ValueError(f"expected user=N pairs, got {pair!r}")
            caps[user] = int(cap)
        return caps

    @property
    def flow(self) -> FlowPolicy:
        defaults = ModelKeyLimits(
            self.model_max_concurrency,
            self.model_requests_per_minute,
            self.model_tokens_per_minute,
            self.model_daily_cost_micros,
        )
        return FlowPolicy(
            defaults,
            USER_KEY_MODE,
            initial_concurrency=self.model_initial_concurrency,
            latency_tolerance=self.model_latency_tolerance,
            account_concurrency=(
                {(DEEPSEEK, model): n for model, n in ACCOUNT_CONCURRENCY.items()}
                if self.model_account_concurrency == "documented"
                else {}
            ),
        )

    @field_validator("model_routes")
    @classmethod
    def _routes(cls, value: str) -> str:
        parse_routes(value)
        return value

    @field_validator("model_prices")
    @classmethod
    def _prices(cls, value: str) -> str:
        PriceTable.parse(value)
        return value

    @field_validator("legacy_answer_query")
    @classmethod
    def _answer_query(cls, value: str) -> str:
        # It runs on the application's own tables: a read, one statement, nothing else.
        if not re.fullmatch(r"\s*SELECT\s[^;]*;?\s*", value, re.IGNORECASE | re.DOTALL):
            raise ValueError("must be one SELECT statement")
        return value

    @field_validator("provider_user_id_key")
    @classmethod
    def _provider_user_id_key(cls, value: SecretStr) -> SecretStr:
        if problem := key_length_problem(value.get_secret_value().encode()):
            raise ValueError(problem)
        return value

    @field_validator("peak_hours")
    @classmethod
    def _peak_hours(cls, value: str) -> str:
        PeakHours.parse(value)
        return value

    @field_validator("off_peak_dates")
    @classmethod
    def _off_peak_dates(cls, value: str) -> str:
        PeakHours.parse("", value)
        return value

    @property
    def provider_user_ids(self) -> ProviderUserIds:
        key = self.provider_user_id_key.get_secret_value().encode()
        return ProviderUserIds(key if self.provider_user_id == "on" else b"")

    @property
    def peak(self) -> PeakHours:
        return PeakHours.parse(self.peak_hours, self.off_peak_dates)

    @property
    def prices(self) -> PriceTable:
        return PriceTable.parse(self.model_prices, self.peak)

    @property
    def budget(self) -> Budget:
        return Budget(self.user_daily_tokens, self.user_daily_cost_micros)

    @property
    def running_caps(self) -> RunningCaps:
        return RunningCaps(self.max_running_per_user, dict(self.max_running_per_user_overrides))

    #: Seconds in-flight RPCs get to finish on SIGTERM/SIGINT.
    shutdown_grace_s: float = Field(default=10.0, ge=0)
    #: Scheduler processes serving one address (scheduler_service/workers.py).
    workers: int = Field(default=1, ge=1, le=64)
    #: Bind with port reuse: set for the processes AIJOB_WORKERS starts, never needed by hand
    #: (with it off, a second scheduler on a busy address fails instead of sharing it).
    reuse_port: bool = False
    #: Reports sent on Poll streams are gathered this long (or up to report_batch_max of them)
    #: and applied in one transaction.
    report_batch_window_ms: float = Field(default=2.0, ge=0, le=100)
    report_batch_max: int = Field(default=200, ge=1, le=2_000)
    #: CreateJob calls that arrive together share one transaction: gathered this long (0: those
    #: that arrive while the event loop is busy, and while earlier batches commit) and up to
    #: create_batch_max of them.
    create_batch_window_ms: float = Field(default=0.0, ge=0, le=100)
    create_batch_max: int = Field(default=64, ge=1, le=500)
    #: How an adopted legacy row's answer is read (active-recall, feynman-evaluation): a query
    #: on the application's tables with ``:answer_id`` and ``:user_id``, returning ``answer``
    #: and optionally ``question`` (docs/operations/legacy-migration.md).
    legacy_answer_query: str = (
        "SELECT question, answer FROM LearnerAnswer WHERE id = :answer_id AND userId = :user_id"
    )
    #: Longest wait a failure's Retry-After may impose before the next attempt.
    max_retry_after_s: float = Field(default=600.0, gt=0, le=86_400)
    #: How many times one job may go back to the queue unspent (a provider's 429, a runtime
    #: shutting down) before such failures spend attempts like any other.
    max_waived_attempts: int = Field(default=MAX_WAIVED_ATTEMPTS, ge=0, le=1_000)
    #: A Poll stream that sent nothing for this long no longer keeps its runtime's leases alive
    #: (runtimes send a keepalive every few seconds).
    stream_alive_s: float = Field(default=15.0, gt=0)

    # -- by concern ----------------------------------------------------------------------------

    @property
    def db(self) -> DatabaseSettings:
        return DatabaseSettings(
            self.database_url,
            self.db_pool_size,
            self.health_interval_s,
            tuple(self.database_failover_hosts),
            self.database_causal_reads,
            health_timeout_s=self.health_timeout_s,
            read_timeout_s=self.db_read_timeout_s,
            connect_timeout_s=self.db_connect_timeout_s,
            ping_after_idle_s=self.db_ping_after_idle_s,
        )

    @property
    def lease(self) -> LeaseSettings:
        return LeaseSettings(
            self.lease_ttl_s, self.lease_grace_s, self.reaper_interval_s, self.stream_alive_s
        )

    @property
    def reports(self) -> ReportSettings:
        return ReportSettings(
            self.report_batch_window_ms / 1000,
            self.report_batch_max,
        )

    @property
    def dispatch(self) -> DispatchSettings:
        return DispatchSettings(self.dispatch_poll_ms / 1000, self.dispatch_batch_max)

    @property
    def outbox(self) -> OutboxSettings:
        return OutboxSettings(
            interval_s=self.outbox_interval_ms / 1000,
            batch=self.outbox_batch,
            processing_timeout_s=self.outbox_processing_timeout_s,
            backoff_s=self.outbox_backoff_ms / 1000,
            events_poll_s=self.events_poll_ms / 1000,
        )

    @property
    def limits(self) -> LimitSettings:
        return LimitSettings(
            max_active_jobs_per_user=self.max_active_jobs_per_user,
            daily_job_quota_per_user=self.daily_job_quota_per_user,
            max_snapshot_bytes=self.max_snapshot_bytes,
            max_output_bytes=self.max_output_bytes,
            max_retry_after_ms=round(self.max_retry_after_s * 1000),
            max_waived_attempts=self.max_waived_attempts,
            max_receive_message_bytes=self.max_receive_message_bytes,
            trees=TreeLimits(
                max_depth=self.tree_max_depth,
                max_children=self.tree_max_children,
                max_parallel=self.tree_max_parallel,
                split_items_per_call=self.quiz_questions_per_call,
            ),
            warmup=WarmupPolicy(self.warmup_s, self.warmup_min_snapshot_bytes),
        )

    @property
    def streams(self) -> StreamSettings:
        return StreamSettings(
            max_concurrent_rpcs=self.max_concurrent_rpcs,
            max_anonymous_rpcs=self.max_anonymous_rpcs,
            max_concurrent_streams=self.max_concurrent_streams,
            max_poll_streams=self.max_poll_streams,
            max_streams_per_token=self.max_streams_per_token,
            max_watch_streams_per_token=self.max_watch_streams_per_token,
            max_subscribe_streams_per_token=self.max_subscribe_streams_per_token,
            max_slots_per_stream=self.max_slots_per_stream,
            poll_subscribe_timeout_s=self.poll_subscribe_timeout_s,
            watch_poll_s=self.watch_poll_ms / 1000,
        )

    @property
    def tls(self) -> TlsSettings:
        return TlsSettings(self.tls_cert, self.tls_key, self.tls_client_ca)

    @property
    def metrics(self) -> MetricsSettings:
        return MetricsSettings(self.metrics_listen, self.metrics_interval_s)


def model_router(settings: SchedulerSettings) -> Router:
    """The routes of AIJOB_MODEL_ROUTES and the breakers' policy; each type's own model is the
    registry's (services/routing.py ``router_of``)."""
    policy = BreakerPolicy(
        settings.breaker_failures, timedelta(seconds=settings.breaker_cool_down_s)
    )
    return Router(
        RouteBook(parse_routes(settings.model_routes), {}),
        lambda _job_type: None,
        USER_KEY_MODE,
        DEEPSEEK,
        policy,
    )

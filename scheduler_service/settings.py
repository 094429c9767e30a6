"""Scheduler settings, read from the environment (prefix ``AIJOB_``) by pydantic-settings."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

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
    #: How often the scheduler checks its database for the health service and refreshes gauges.
    health_interval_s: float = Field(default=2.0, gt=0)
    #: Serve gRPC server reflection (grpcurl list/describe).
    reflection: bool = True
    #: Bearer tokens per role, comma-separated. With none set on a loopback address the server
    #: generates a set and writes it to ``dev_tokens_file``; elsewhere it refuses to start.
    runtime_tokens: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    service_tokens: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    admin_tokens: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    dev_tokens_file: str = ".aijob/dev-tokens.json"
    #: TLS: certificate and key of the server; with a client CA, clients must present a
    #: certificate it signed (mutual TLS).
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""
    #: Per-user limits on CreateJob: jobs queued or running at once, and jobs created per UTC day.
    max_active_jobs_per_user: int = Field(default=100, ge=1)
    daily_job_quota_per_user: int = Field(default=10_000, ge=1)
    #: Largest snapshot (canonical JSON bytes) CreateJob accepts.
    max_snapshot_bytes: int = Field(default=1024 * 1024, ge=1024)
    #: Concurrent RPCs the server runs; more are refused with RESOURCE_EXHAUSTED.
    max_concurrent_rpcs: int = Field(default=10_000, ge=1)
    #: HTTP/2 streams one connection may open at once.
    max_concurrent_streams: int = Field(default=1_000, ge=1)
    #: Runtime Poll streams this replica holds at once (subscribed or still subscribing); more
    #: are refused with RESOURCE_EXHAUSTED TOO_MANY_STREAMS, so that however many streams come,
    #: max_concurrent_rpcs minus this many RPCs stay free for everything else.
    max_poll_streams: int = Field(default=1_000, ge=1)
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
    #: Fault injection for chaos tests only: hold claimed outbox events this long before
    #: delivering them. Leave at 0.
    fault_outbox_stall_ms: int = Field(default=0, ge=0)
    #: AES-256-GCM key (base64, 32 bytes) that encrypts users' model keys at rest.
    credential_key: SecretStr = SecretStr("")

    @field_validator("runtime_tokens", "service_tokens", "admin_tokens", mode="before")
    @classmethod
    def _split_tokens(cls, value: object) -> object:
        if isinstance(value, str):
            return [t.strip() for t in value.split(",") if t.strip()]
        return value

    #: Seconds in-flight RPCs get to finish on SIGTERM/SIGINT.
    shutdown_grace_s: float = Field(default=10.0, ge=0)

"""Scheduler settings, read from the environment (prefix ``AIJOB_``) by pydantic-settings."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

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
    #: Serve gRPC server reflection (grpcurl list/describe).
    reflection: bool = True
    #: Seconds in-flight RPCs get to finish on SIGTERM/SIGINT.
    shutdown_grace_s: float = Field(default=10.0, ge=0)

"""The scheduler's settings as each concern reads them (``settings.lease``, ``.streams``, ...):
plain values with every duration in seconds, built once from the environment by
:class:`scheduler_service.wiring.settings.SchedulerSettings`. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler_service.core.trees import TreeLimits
from scheduler_service.core.warmup import WarmupPolicy

__all__ = [
    "DatabaseSettings",
    "DispatchSettings",
    "LeaseSettings",
    "LimitSettings",
    "MetricsSettings",
    "OutboxSettings",
    "ReportSettings",
    "StreamSettings",
    "TlsSettings",
]


@dataclass(frozen=True, slots=True)
class DatabaseSettings:
    url: str
    pool_size: int
    #: How often reachability is checked for the health service.
    health_interval_s: float
    #: The other nodes, in order (the URL's host is the preferred one).
    failover_hosts: tuple[str, ...] = ()
    causal_reads: bool = False
    health_timeout_s: float = 1.5
    read_timeout_s: float = 30.0
    connect_timeout_s: float = 5.0
    ping_after_idle_s: float = 0.5


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    ttl_s: float
    #: How long past ``lockUntil`` the reaper waits before taking a lease back.
    grace_s: float
    reaper_interval_s: float
    #: How long a silent Poll stream still keeps its runtime's leases alive.
    stream_alive_s: float

    @property
    def keep_alive_interval_s(self) -> float:
        """Streams extend their leases three times per lease, so one missed round costs none."""
        return self.ttl_s / 3


@dataclass(frozen=True, slots=True)
class ReportSettings:
    window_s: float
    max_batch: int


@dataclass(frozen=True, slots=True)
class DispatchSettings:
    poll_interval_s: float
    batch_max: int


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxSettings:
    interval_s: float
    batch: int
    processing_timeout_s: float
    backoff_s: float
    #: How often SubscribeEvents looks for events published through other replicas.
    events_poll_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitSettings:
    max_active_jobs_per_user: int
    daily_job_quota_per_user: int
    max_snapshot_bytes: int
    max_output_bytes: int
    max_retry_after_ms: int
    max_waived_attempts: int
    max_receive_message_bytes: int
    trees: TreeLimits
    warmup: WarmupPolicy


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamSettings:
    max_concurrent_rpcs: int
    max_anonymous_rpcs: int
    max_concurrent_streams: int
    max_poll_streams: int
    max_streams_per_token: int
    max_watch_streams_per_token: int
    max_subscribe_streams_per_token: int
    max_slots_per_stream: int
    poll_subscribe_timeout_s: float
    #: How often WatchJob looks for changes made through other replicas.
    watch_poll_s: float


@dataclass(frozen=True, slots=True)
class TlsSettings:
    cert: str
    key: str
    client_ca: str

    @property
    def enabled(self) -> bool:
        return bool(self.cert or self.key)


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    #: host:port of the Prometheus endpoint; empty turns it off.
    listen: str
    #: How often the gauges read from the database are refreshed.
    interval_s: float

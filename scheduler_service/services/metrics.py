"""Prometheus metrics of the scheduler (names start with ``aijob_``).

Counters and histograms are updated where things happen; the gauges that describe the database
(jobs queued and running, queue depth and age, outbox lag and dead events) are refreshed every
``AIJOB_METRICS_INTERVAL_S`` by a background task, from GetQueueStats' query narrowed to what is
not finished (finished jobs are counted by ``aijob_job_outcomes_total``).
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Sequence

from prometheus_client import Counter, Gauge, Histogram

from scheduler_service.core.commands import QueueStats
from scheduler_service.core.model_keys import KeyStats
from scheduler_service.core.state_machine import LifecycleStatus

JOBS = Gauge(
    "aijob_jobs",
    "Queued and running jobs by queue, type and lifecycle status",
    ["queue", "job_type", "status"],
)
QUEUE_DEPTH = Gauge("aijob_queue_depth", "Queued jobs per queue", ["queue"])
OLDEST_QUEUED = Gauge("aijob_queue_oldest_age_seconds", "Age of the oldest queued job", ["queue"])
DEFERRED = Gauge(
    "aijob_jobs_deferred", "Off-peak jobs waiting out a peak window (the cheap hours)", ["queue"]
)
OUTBOX_LAG = Gauge("aijob_outbox_lag_seconds", "Age of the oldest pending outbox event")
OUTBOX_DEAD = Gauge("aijob_outbox_dead_events", "Outbox events that exhausted their attempts")
LEASE_LATENCY = Histogram(
    "aijob_enqueue_to_lease_seconds",
    "Time from a job becoming available to its lease",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
POLL_STREAMS = Gauge("aijob_poll_streams", "Runtime Poll streams open on this replica")
LEASES = Counter("aijob_leases_total", "Leases granted")
LEASE_EXPIRIES = Counter(
    "aijob_lease_expiries_total", "Leases taken back by the reaper", ["outcome"]
)
RETRIES = Counter("aijob_retries_total", "Failed attempts requeued for another try", ["error_code"])
OUTCOMES = Counter("aijob_job_outcomes_total", "Jobs reaching a terminal state", ["status"])
RPCS = Counter("aijob_rpc_total", "RPCs answered", ["method", "code"])
REPORTS = Counter(
    "aijob_reports_total",
    "Reports (result, failure, heartbeat) answered on Poll streams, by the code of their ack",
    ["kind", "code"],
)
REPORT_BATCH = Histogram(
    "aijob_report_batch_size",
    "Reports applied together in one group commit",
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500),
)
REFUSED_CALLS = Counter(
    "aijob_refused_calls_total",
    "Calls refused by authentication or capacity (their log lines are rate-limited)",
    ["code"],
)
RPC_LATENCY = Histogram("aijob_rpc_duration_seconds", "RPC handling time", ["method"])
_KEY = ["provider", "model", "scope"]
MODEL_INFLIGHT = Gauge("aijob_model_inflight", "Jobs running per model key", _KEY)
MODEL_LIMIT = Gauge(
    "aijob_model_limit",
    "Calls at once allowed per model key now (congestion lowers it; 0 is no limit)",
    _KEY,
)
MODEL_PAUSED = Gauge(
    "aijob_model_paused", "1 while a model key is paused by a provider's 429", _KEY
)
MODEL_RATE_LIMITED = Counter(
    "aijob_model_rate_limited_total", "429s reported by runtimes per model key", _KEY
)

MODEL_BREAKER_OPEN = Gauge(
    "aijob_model_breaker_open",
    "Model keys whose circuit breaker is open or half open (platform: 0 or 1; user: how many "
    "users' keys)",
    _KEY,
)


def publish_breakers(open_keys: Sequence[tuple[str, str, str]]) -> None:
    """``open_keys``: (provider, model, scope) of each breaker not closed."""
    MODEL_BREAKER_OPEN.clear()
    for labels, count in Tally(open_keys).items():
        MODEL_BREAKER_OPEN.labels(*labels).set(count)


def publish_model_keys(keys: Sequence[KeyStats]) -> None:
    for gauge in (MODEL_INFLIGHT, MODEL_LIMIT, MODEL_PAUSED):
        gauge.clear()
    for stats in keys:
        labels = (stats.key.provider, stats.key.model, stats.key.scope)
        MODEL_INFLIGHT.labels(*labels).set(stats.in_flight)
        MODEL_LIMIT.labels(*labels).set(stats.effective_concurrency)
        MODEL_PAUSED.labels(*labels).set(1 if stats.paused_until is not None else 0)


def publish_stats(stats: QueueStats) -> None:
    JOBS.clear()
    depth: dict[str, int] = {}
    for queue, job_type, status, count in stats.depths:
        JOBS.labels(queue, job_type, status).set(count)
        if status == LifecycleStatus.QUEUED.value:
            depth[queue] = depth.get(queue, 0) + count
    QUEUE_DEPTH.clear()
    for queue, count in depth.items():
        QUEUE_DEPTH.labels(queue).set(count)
    OLDEST_QUEUED.clear()
    for queue, age in stats.oldest_queued_s.items():
        OLDEST_QUEUED.labels(queue).set(age)
    DEFERRED.clear()
    for queue, count in stats.deferred.items():
        DEFERRED.labels(queue).set(count)
    OUTBOX_LAG.set(stats.outbox_lag_s)
    OUTBOX_DEAD.set(stats.dead_events)

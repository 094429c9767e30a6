"""Prometheus metrics of a runtime (names start with ``aijob_runtime_``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

CONNECTED = Gauge("aijob_runtime_connected", "1 while the Poll stream to the scheduler is open")
IN_FLIGHT = Gauge("aijob_runtime_in_flight_jobs", "Jobs running now")
JOBS = Counter("aijob_runtime_jobs_total", "Jobs finished, by reported outcome", ["outcome"])
ERRORS = Counter("aijob_runtime_errors_total", "Failed attempts by error code", ["error_code"])
MODEL_LATENCY = Histogram(
    "aijob_runtime_model_latency_seconds",
    "Model call time",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
FIRST_TOKEN = Histogram(
    "aijob_runtime_model_first_token_seconds",
    "Time from a model call to its first token (grows first when a provider holds requests)",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
TOKENS = Counter("aijob_runtime_tokens_total", "Model tokens", ["kind"])
COST = Counter("aijob_runtime_cost_micros_total", "Model cost in millionths of the price unit")

"""What runtimes report (results, failures, heartbeats), what each report is answered, and how
accepted reports are counted and traced: the types the protocol's unary calls and its group
commit share."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from opentelemetry.trace import SpanKind
from pydantic import BaseModel

from scheduler_service.core.records import (
    HeartbeatOutcome,
    JobError,
    JobRecord,
    LeaseGrant,
    LeasePayload,
)
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.core.usage import Usage
from scheduler_service.services import metrics
from shared import tracing

__all__ = [
    "Accepted",
    "ChunkReport",
    "ChunkStored",
    "FailedAttempt",
    "FailureOutcome",
    "FailureReport",
    "HeartbeatReport",
    "Outcome",
    "PreparedResult",
    "Report",
    "ReportAnswer",
    "ResultSubmission",
    "SubmitOutcome",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ResultSubmission:
    job_id: str
    attempt_no: int
    runtime_instance_id: str
    output_hash: str
    output_json: str
    usage: Usage | None
    lease_token: str = field(default="", repr=False)


@dataclass(frozen=True, slots=True)
class HeartbeatReport:
    job_id: str
    attempt_no: int
    runtime_instance_id: str
    progress: int
    lease_token: str = field(default="", repr=False)
    #: The attempt's first token arrived: its prompt's prefix is in the provider's cache.
    first_token: bool = False


@dataclass(frozen=True, slots=True)
class ChunkReport:
    """Text the attempt's model call wrote, from ``offset`` of the attempt's text."""

    job_id: str
    attempt_no: int
    runtime_instance_id: str
    offset: int
    text: str = field(repr=False)
    lease_token: str = field(default="", repr=False)


@dataclass(frozen=True, slots=True)
class ChunkStored:
    """A chunk's answer: stored (or stored before, at the same offset)."""


@dataclass(frozen=True, slots=True)
class PreparedResult:
    """A submission that passed the checks that need no database."""

    submission: ResultSubmission
    output: Any
    key: str


@dataclass(frozen=True, slots=True)
class Accepted:
    """A result the job accepts: what its success writes."""

    job: JobRecord
    result: PreparedResult
    projector: str
    validated: BaseModel


@dataclass(frozen=True, slots=True)
class SubmitOutcome:
    result_idempotency_key: str
    duplicate: bool


@dataclass(frozen=True, slots=True)
class FailureReport:
    job_id: str
    attempt_no: int
    runtime_instance_id: str
    error_code: str
    retryable: bool
    public_message: str
    internal_message: str
    retry_after_ms: int
    usage: Usage | None
    lease_token: str = field(default="", repr=False)


@dataclass(frozen=True, slots=True)
class FailedAttempt:
    """One attempt to end as failed: by its runtime's report, or by the reaper (``overdue_only``:
    only while the lease is still past its grace, so a heartbeat that lands first wins)."""

    job_id: str
    attempt_no: int
    error: JobError
    retryable: bool
    retry_after_ms: int = 0
    runtime_instance_id: str | None = None
    usage: Usage | None = None
    overdue_only: bool = False
    #: The token the runtime presented (None for the reaper, which holds no lease).
    lease_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class FailureOutcome:
    status: LifecycleStatus
    next_attempt_at: datetime | None = None
    #: The failed attempt's error code (for the retry metric).
    error_code: str = ""


def trace_leases(leases: Sequence[tuple[LeasePayload, str]], started_ns: int) -> None:
    """A span per lease given, in its job's trace (once the claim committed)."""
    for lease, holder in leases:
        parent = tracing.context_of(lease.traceparent)
        if parent is not None:
            tracing.finished_span(
                "aijob.lease",
                parent=parent,
                start_ns=started_ns,
                kind=SpanKind.PRODUCER,
                attributes={
                    "aijob.job_id": lease.job_id,
                    "aijob.job_type": lease.job_type,
                    "aijob.attempt": lease.attempt_no,
                    "aijob.runtime_instance_id": holder,
                },
            )


def trace_results(done: Sequence[tuple[JobRecord, int, Usage | None]], started_ns: int) -> None:
    """The result's acceptance and its projection, in each job's trace (once committed)."""
    for job, attempt_no, usage in done:
        parent = tracing.context_of(job.traceParent)
        if parent is None:
            continue
        attributes: dict[str, str | int] = {
            "aijob.job_id": job.id,
            "aijob.job_type": job.jobType,
            "aijob.attempt": attempt_no,
        }
        if usage is not None:
            attributes["gen_ai.usage.input_tokens"] = usage.prompt_tokens
            attributes["gen_ai.usage.output_tokens"] = usage.completion_tokens
        accepted = tracing.finished_span(
            "aijob.SubmitResult",
            parent=parent,
            start_ns=started_ns,
            kind=SpanKind.SERVER,
            attributes=attributes,
        )
        tracing.finished_span(
            "aijob.projection",
            parent=accepted,
            start_ns=started_ns,
            attributes={"aijob.job_id": job.id, "aijob.job_type": job.jobType},
        )


def count_leases(grants: Sequence[LeaseGrant]) -> None:
    metrics.LEASES.inc(len(grants))
    for grant in grants:
        metrics.LEASE_LATENCY.observe(grant.waited_s)


Report = ResultSubmission | FailureReport | HeartbeatReport | ChunkReport
Outcome = SubmitOutcome | FailureOutcome | HeartbeatOutcome | ChunkStored
#: A report's answer: its outcome, or the error its unary call would have raised.
ReportAnswer = Outcome | Exception


def count_accepted(job_ids: Sequence[str]) -> None:
    if not job_ids:
        return
    metrics.OUTCOMES.labels(LifecycleStatus.SUCCEEDED.value).inc(len(job_ids))
    # One line per group commit, naming its jobs: a line per job cost 2 % of a drain's CPU.
    log.info(
        "results accepted",
        extra={"action": "result_accepted", "jobIds": list(job_ids), "count": len(job_ids)},
    )


def counted(outcome: FailureOutcome, error_code: str) -> FailureOutcome:
    count_failure(outcome, error_code)
    return outcome


def count_failure(outcome: FailureOutcome, error_code: str = "") -> None:
    if outcome.status is LifecycleStatus.QUEUED:
        metrics.RETRIES.labels(error_code or outcome.error_code).inc()
    else:
        metrics.OUTCOMES.labels(outcome.status.value).inc()

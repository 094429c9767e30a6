"""What the runtime protocol decides without a database: a report's own checks (ids, sizes, the
output's JSON and hash, the failure's code), whether a job as read accepts a result from the
attempt that sent it, and whether a lease can carry a job's input at all."""

from __future__ import annotations

from typing import Any

from scheduler_service.core import validation
from scheduler_service.core.errors import (
    InvalidRequestError,
    JobAlreadyTerminalError,
    JobNotFoundError,
    LeaseLostError,
    ResultAlreadyExistsError,
)
from scheduler_service.core.job_registry import JobRegistry
from scheduler_service.core.lease_tokens import digest
from scheduler_service.core.records import JobError, JobRecord, LeasePayload
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.core.transitions import holds_lease
from scheduler_service.services.reports import (
    Accepted,
    ChunkReport,
    FailureReport,
    HeartbeatReport,
    PreparedResult,
    ResultSubmission,
)
from shared.canonical_json import output_hash, result_idempotency_key
from shared.error_codes import ErrorCode
from shared.redaction import scrub_secrets

__all__ = [
    "check_heartbeat",
    "check_still_holder",
    "failure_error",
    "judged_result",
    "prepared_result",
    "unleasable_error",
]


def leasable_input(snapshot: Any, params: Any) -> bool:
    """Whether a lease can carry this snapshot and these params."""
    return validation.lease_problem(snapshot) is None and validation.lease_problem(params) is None


def unleasable_error(lease: LeasePayload) -> JobError | None:
    """The failure of a job whose snapshot or params a lease cannot carry, or None."""
    for name, value, code in (
        ("snapshot", lease.snapshot, ErrorCode.INVALID_SNAPSHOT),
        ("params", lease.params, ErrorCode.INVALID_PARAMS),
    ):
        problem = validation.lease_problem(value)
        if problem is not None:
            return JobError(
                code.value,
                f"the job's {name} cannot be sent to a runtime: it {problem}",
                f"{name} {problem}",
            )
    return None


def check_heartbeat(beat: HeartbeatReport) -> None:
    """The heartbeat's checks that need no database."""
    validation.job_id(beat.job_id)
    validation.attempt_no(beat.attempt_no)
    validation.instance_id_format(beat.runtime_instance_id)
    validation.progress(beat.progress)


def check_chunk(chunk: ChunkReport, max_output_bytes: int) -> None:
    """The chunk's checks that need no database."""
    validation.job_id(chunk.job_id)
    validation.attempt_no(chunk.attempt_no)
    validation.instance_id_format(chunk.runtime_instance_id)
    if not chunk.text:
        raise InvalidRequestError("an output chunk carries text", field="chunk.text")
    validation.max_bytes(chunk.text, max_output_bytes, "chunk.text")


def prepared_result(sub: ResultSubmission, max_output_bytes: int) -> PreparedResult:
    """The request's checks that need no database: ids, sizes, JSON and its hash."""
    validation.job_id(sub.job_id)
    validation.attempt_no(sub.attempt_no)
    validation.instance_id_format(sub.runtime_instance_id)
    validation.output_hash(sub.output_hash)
    validation.max_bytes(sub.output_json, max_output_bytes, "output_json")
    output = validation.json_document(sub.output_json, "output_json")
    if output_hash(output) != sub.output_hash:
        raise InvalidRequestError(
            "output_hash is not the SHA-256 of the output's canonical JSON", field="output_hash"
        )
    key = result_idempotency_key(sub.job_id, sub.attempt_no, sub.output_hash)
    return PreparedResult(sub, output, key)


def judged_result(
    job: JobRecord | None, result: PreparedResult, registry: JobRegistry
) -> Accepted | None:
    """What the job as it is now makes of ``result``: None for a repeat of the accepted
    result, the accepted output otherwise; a typed error when it cannot be accepted."""
    sub = result.submission
    if job is None:
        raise JobNotFoundError(sub.job_id)
    if job.resultIdempotencyKey == result.key:
        return None
    check_still_holder(job, sub.attempt_no, sub.runtime_instance_id, sub.lease_token)
    definition = registry.get(job.jobType)
    schema = registry.output_schema(job.jobType, job.outputSchemaVersion or None)
    validated = validation.against_schema(
        schema, result.output, "output", ErrorCode.VALIDATION_FAILED
    )
    return Accepted(job, result, definition.projector, validated)


def failure_error(report: FailureReport) -> JobError:
    """The report's checks that need no database; the error it records."""
    validation.job_id(report.job_id)
    validation.attempt_no(report.attempt_no)
    validation.instance_id_format(report.runtime_instance_id)
    if report.error_code not in ErrorCode.__members__:
        raise InvalidRequestError("error_code is not in the error catalogue", field="error_code")
    if report.retry_after_ms < 0:
        raise InvalidRequestError("retry_after must not be negative", field="retry_after")
    # A provider's message may quote the request, key included: scrubbed before it is stored.
    return JobError(
        report.error_code,
        scrub_secrets(report.public_message[:500]) or "The job failed.",
        scrub_secrets(report.internal_message[:10_000]) or None,
    )


def check_still_holder(
    job: JobRecord, attempt_no: int, runtime_instance_id: str, lease_token: str | None
) -> None:
    """Raise the error the unary call answers unless ``attempt_no`` of ``runtime_instance_id``
    holds the job now, proven by its lease token (a wrong token reads as a lost lease)."""
    if job.attemptCount != attempt_no:
        raise LeaseLostError(job.id, attempt_no, job.lifecycleStatus)
    if job.lifecycleStatus is LifecycleStatus.SUCCEEDED:
        raise ResultAlreadyExistsError(job.id)
    if job.is_terminal:
        raise JobAlreadyTerminalError(job.id, job.lifecycleStatus)
    token_hash = None if lease_token is None else digest(lease_token)
    if not holds_lease(job, attempt_no, runtime_instance_id, token_hash):
        raise LeaseLostError(job.id, attempt_no, job.lifecycleStatus)

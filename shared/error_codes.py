"""The public error-code catalogue: each code with its retryable flag (docs/architecture.md,
*Retries and the error catalogue*).

Runtimes report failures with these codes; the scheduler decides retries from them. The API codes
(JOB_NOT_FOUND, ...) travel to callers as ``google.rpc.ErrorInfo.reason`` in domain ``aijob.v1``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["ERROR_DOMAIN", "EXECUTION_CODES", "ErrorCode", "ErrorSpec", "is_retryable", "spec_of"]

ERROR_DOMAIN = "aijob.v1"


class ErrorCode(StrEnum):
    # Execution errors reported by runtimes.
    MODEL_TIMEOUT = "MODEL_TIMEOUT"
    MODEL_RATE_LIMIT = "MODEL_RATE_LIMIT"
    NETWORK_ERROR = "NETWORK_ERROR"
    TEMPORARY_PROVIDER_ERROR = "TEMPORARY_PROVIDER_ERROR"
    JOB_TIMEOUT = "JOB_TIMEOUT"
    VALIDATION_FAILED = "VALIDATION_FAILED"
    VALIDATION_UNPARSEABLE = "VALIDATION_UNPARSEABLE"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    INVALID_SNAPSHOT = "INVALID_SNAPSHOT"
    INVALID_SCHEMA = "INVALID_SCHEMA"
    INVALID_CREDENTIAL = "INVALID_CREDENTIAL"
    CREDENTIAL_NOT_FOUND = "CREDENTIAL_NOT_FOUND"
    CONTENT_SAFETY_BLOCKED = "CONTENT_SAFETY_BLOCKED"
    MODEL_CONTEXT_LENGTH_EXCEEDED = "MODEL_CONTEXT_LENGTH_EXCEEDED"
    MODEL_OUTPUT_TRUNCATED = "MODEL_OUTPUT_TRUNCATED"
    #: 404 from the provider: the model (or the endpoint: a base URL without ``/v1``) does not
    #: exist.
    MODEL_NOT_FOUND = "MODEL_NOT_FOUND"
    #: Any other 4xx the provider answers: the request itself was refused (an unsupported
    #: parameter, an invalid value); retrying the same request cannot help.
    MODEL_BAD_REQUEST = "MODEL_BAD_REQUEST"
    #: 402: the account behind the key has no balance left.
    MODEL_INSUFFICIENT_BALANCE = "MODEL_INSUFFICIENT_BALANCE"
    #: The answer was whitespace only and finished normally: DeepSeek's JSON Output answers so
    #: when the model could not produce JSON. Retried as a new call, never repaired.
    MODEL_BLANK_ANSWER = "MODEL_BLANK_ANSWER"
    CANCELLED = "CANCELLED"
    RUNTIME_SHUTDOWN = "RUNTIME_SHUTDOWN"
    # Lifecycle outcomes decided by the scheduler.
    JOB_EXPIRED = "JOB_EXPIRED"
    #: A queued or running job of a type no longer registered (a retired definition, or a legacy
    #: row of a type this engine never ran): failed on first sight, never retried.
    JOB_TYPE_UNKNOWN = "JOB_TYPE_UNKNOWN"
    LEASE_EXPIRED_ATTEMPTS_EXHAUSTED = "LEASE_EXPIRED_ATTEMPTS_EXHAUSTED"
    #: The user's daily budget is spent: CreateJob refuses, and their queued jobs fail instead of
    #: being leased (until midnight UTC). Never retried.
    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
    #: A legacy row of an adopted type (active-recall, feynman-evaluation) names no answer, or
    #: one the application's tables do not hold: there is nothing to evaluate. Never retried.
    LEGACY_ANSWER_NOT_FOUND = "LEGACY_ANSWER_NOT_FOUND"
    #: A parent's child failed for good (``all_success``), or too few of its children succeeded
    #: (``all_done``). Never retried by itself: RetryJob runs the children that did not succeed.
    CHILD_FAILED = "CHILD_FAILED"
    # API errors answered to callers.
    JOB_NOT_FOUND = "JOB_NOT_FOUND"
    JOB_NOT_CANCELLABLE = "JOB_NOT_CANCELLABLE"
    JOB_ALREADY_CANCELLED = "JOB_ALREADY_CANCELLED"
    JOB_ALREADY_LOCKED = "JOB_ALREADY_LOCKED"
    JOB_NOT_QUEUED = "JOB_NOT_QUEUED"
    JOB_ALREADY_TERMINAL = "JOB_ALREADY_TERMINAL"
    JOB_NOT_RUNNING = "JOB_NOT_RUNNING"
    JOB_NOT_RETRYABLE = "JOB_NOT_RETRYABLE"
    LEASE_LOST = "LEASE_LOST"
    ILLEGAL_TRANSITION = "ILLEGAL_TRANSITION"
    RESULT_ALREADY_EXISTS = "RESULT_ALREADY_EXISTS"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    INVALID_PARAMS = "INVALID_PARAMS"
    IDEMPOTENCY_KEY_REUSED = "IDEMPOTENCY_KEY_REUSED"
    TOO_MANY_JOBS = "TOO_MANY_JOBS"
    QUOTA_EXCEEDED = "QUOTA_EXCEEDED"
    TOO_MANY_STREAMS = "TOO_MANY_STREAMS"
    PLATFORM_UNAVAILABLE = "PLATFORM_UNAVAILABLE"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    INTERNAL = "INTERNAL"


@dataclass(frozen=True, slots=True)
class ErrorSpec:
    code: ErrorCode
    retryable: bool
    #: Attempts this code may use in total, when it is capped below the job's maxAttempts
    #: (INTERNAL_* is retried once, docs/architecture.md).
    max_attempts: int | None = None
    #: Whether a failure with this code spends one of the job's attempts. Congestion (a
    #: provider's 429) and a runtime shutting down say nothing about the job: the attempt goes back
    #: unspent.
    spends_attempt: bool = True


_RETRYABLE = {
    ErrorCode.MODEL_TIMEOUT,
    ErrorCode.MODEL_RATE_LIMIT,
    ErrorCode.NETWORK_ERROR,
    ErrorCode.TEMPORARY_PROVIDER_ERROR,
    ErrorCode.JOB_TIMEOUT,
    ErrorCode.VALIDATION_FAILED,
    ErrorCode.VALIDATION_UNPARSEABLE,
    ErrorCode.RUNTIME_SHUTDOWN,
    ErrorCode.MODEL_BLANK_ANSWER,
}

_SPECS: dict[ErrorCode, ErrorSpec] = {
    code: ErrorSpec(code, code in _RETRYABLE) for code in ErrorCode
}
_SPECS[ErrorCode.INTERNAL_ERROR] = ErrorSpec(ErrorCode.INTERNAL_ERROR, True, max_attempts=2)
for _unspent in (ErrorCode.MODEL_RATE_LIMIT, ErrorCode.RUNTIME_SHUTDOWN):
    _SPECS[_unspent] = ErrorSpec(_unspent, True, spends_attempt=False)


#: The codes a runtime reports for a failed attempt (docs/error-codes.md lists exactly these).
EXECUTION_CODES = frozenset(list(ErrorCode)[: list(ErrorCode).index(ErrorCode.JOB_EXPIRED)])


def spec_of(code: str) -> ErrorSpec:
    """The catalogue entry for ``code``; unknown codes raise ``ValueError``."""
    return _SPECS[ErrorCode(code)]


def is_retryable(code: str) -> bool:
    """Whether a failure with ``code`` may be retried at all."""
    return spec_of(code).retryable

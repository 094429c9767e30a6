"""The scheduler's exceptions: one root, each class carrying its public error code and the gRPC
status it is answered with.

    SchedulerError                        INTERNAL
    ├── ConfigurationError                (start-up only)
    ├── RegistryError                     (start-up only: a job definition is invalid)
    │   ├── DuplicateJobDefinitionError
    │   └── InvalidJobDefinitionError
    ├── JobNotFoundError                  NOT_FOUND: no such job (or not visible to the caller)
    ├── InvalidRequestError               INVALID_ARGUMENT: a request field is malformed
    ├── UnknownJobTypeError               INVALID_ARGUMENT
    ├── ResultAlreadyExistsError          ALREADY_EXISTS: the job succeeded with another result
    ├── IdempotencyKeyReusedError         ALREADY_EXISTS: same key, different request
    ├── LimitExceededError                RESOURCE_EXHAUSTED: a per-user cap or quota is used up
    ├── RuntimeIdentityError              PERMISSION_DENIED
    ├── UserKeyNotAllowedError            PERMISSION_DENIED
    ├── JobNotRetryableError              FAILED_PRECONDITION
    ├── CredentialUnavailableError        FAILED_PRECONDITION
    ├── LegacyAdoptionError               FAILED_PRECONDITION: a legacy type cannot be adopted now
    ├── DatabaseUnavailableError          UNAVAILABLE: the database cannot be reached; retry
    ├── DuplicateKeyError                 INTERNAL unless a service catches it: a unique key taken
    ├── ShuttingDownError                 UNAVAILABLE: this replica is stopping; reconnect
    └── LifecycleError                    FAILED_PRECONDITION: a lifecycle write did not apply
        ├── IllegalTransitionError        the state machine has no such transition
        ├── JobAlreadyTerminalError       the job is succeeded, failed or cancelled
        ├── JobLockConflictError          the job is not (or not yet) available to lock
        ├── JobNotActiveError             the job is not running
        ├── JobNotCancellableError        the job can no longer be cancelled
        └── LeaseLostError                the caller no longer holds the lease it names

The status is the *name* of a gRPC status code, so this module (imported by the pure core) needs
no gRPC; the one server interceptor (scheduler_service.api.status) turns it into the answer.
Messages are written for users: no SQL, paths or stack traces.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from shared.error_codes import ErrorCode

#: How much of a caller's own input an error message quotes: a long value echoed whole would
#: make the answer larger than the caller accepts.
ECHO_CHARS = 64


def echo(value: object) -> str:
    """``value`` quoted for an error message, cut to :data:`ECHO_CHARS` characters."""
    text = repr(value)
    return text if len(text) <= ECHO_CHARS else text[: ECHO_CHARS - 1] + "…"


class SchedulerError(Exception):
    """Root of every error the scheduler raises on purpose."""

    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL
    status: ClassVar[str] = "INTERNAL"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigurationError(SchedulerError):
    """The scheduler cannot run with these settings (raised at start-up)."""


class RegistryError(SchedulerError):
    """A job definition cannot be registered (raised at start-up)."""


class DuplicateJobDefinitionError(RegistryError):
    pass


class InvalidJobDefinitionError(RegistryError):
    pass


class JobNotFoundError(SchedulerError):
    code = ErrorCode.JOB_NOT_FOUND
    status = "NOT_FOUND"

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id!r} not found")
        self.job_id = job_id


class InvalidRequestError(SchedulerError):
    code = ErrorCode.INVALID_ARGUMENT
    status = "INVALID_ARGUMENT"

    def __init__(self, message: str, *, field: str = "", code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.field = field
        if code is not None:
            self.code = code  # type: ignore[misc]


class UnknownJobTypeError(InvalidRequestError):
    """Names the field: ``job_type`` missing, or not a registered type."""

    def __init__(self, job_type: str, known: Sequence[str] = ()) -> None:
        message = (
            f"job_type {echo(job_type)} is not a registered job type"
            if job_type
            else "job_type is required"
        )
        if known:
            message += f" (the job types: {', '.join(sorted(known))})"
        super().__init__(message, field="job_type")
        self.job_type = job_type


class ResultAlreadyExistsError(SchedulerError):
    code = ErrorCode.RESULT_ALREADY_EXISTS
    status = "ALREADY_EXISTS"

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id!r} already succeeded with a different result")
        self.job_id = job_id


class IdempotencyKeyReusedError(SchedulerError):
    code = ErrorCode.IDEMPOTENCY_KEY_REUSED
    status = "ALREADY_EXISTS"

    def __init__(self) -> None:
        super().__init__("idempotency_key was already used for a different request")


class LimitExceededError(SchedulerError):
    status = "RESOURCE_EXHAUSTED"

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code  # type: ignore[misc]


class RuntimeIdentityError(SchedulerError):
    """A runtime token bound to an instance-id prefix named an instance outside it."""

    code = ErrorCode.PERMISSION_DENIED
    status = "PERMISSION_DENIED"


class UserKeyNotAllowedError(SchedulerError):
    """A runtime not allowed to use user keys asked for a user-key job or its key."""

    code = ErrorCode.PERMISSION_DENIED
    status = "PERMISSION_DENIED"


class JobNotRetryableError(SchedulerError):
    code = ErrorCode.JOB_NOT_RETRYABLE
    status = "FAILED_PRECONDITION"

    def __init__(self, job_id: str, status: str) -> None:
        super().__init__(f"job {job_id!r} is {status}; only failed or cancelled jobs are retried")


class CredentialUnavailableError(SchedulerError):
    code = ErrorCode.CREDENTIAL_NOT_FOUND
    status = "FAILED_PRECONDITION"


class LegacyAdoptionError(SchedulerError):
    """AdoptLegacyJobs cannot proceed: the answer query fails, or the schema is contracted."""

    code = ErrorCode.LEGACY_ANSWER_NOT_FOUND
    status = "FAILED_PRECONDITION"


class UnknownCredentialError(SchedulerError):
    """The caller has no active credential with that id."""

    code = ErrorCode.CREDENTIAL_NOT_FOUND
    status = "NOT_FOUND"


class CredentialRevokedError(CredentialUnavailableError):
    """The job's credential does not exist for its user, or was deleted: the job cannot run."""

    code = ErrorCode.INVALID_CREDENTIAL


class DatabaseUnavailableError(SchedulerError):
    code = ErrorCode.PLATFORM_UNAVAILABLE
    status = "UNAVAILABLE"


class DuplicateKeyError(SchedulerError):
    """A write met a unique key another row holds (two creates raced for one idempotency key):
    the store's adapter says so in the domain's terms and the service decides what it means."""


class DatabaseBusyError(DatabaseUnavailableError):
    """A transaction that kept losing to others (deadlocks, lock waits, Galera certification
    conflicts) past its re-run budget: nothing was written; the caller may retry."""


class ShuttingDownError(SchedulerError):
    """This replica is stopping: a Poll stream ends so its runtime reconnects elsewhere."""

    code = ErrorCode.PLATFORM_UNAVAILABLE
    status = "UNAVAILABLE"


class LifecycleError(SchedulerError):
    """A guarded lifecycle write matched no row; ``current`` is the state found afterwards."""

    status = "FAILED_PRECONDITION"

    def __init__(self, job_id: str, message: str, current: str | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.current = current


class UnleasableJobError(LifecycleError):
    """Lock found a job whose input a lease cannot carry (a row not written through CreateJob):
    the job failed alone, with this code, instead of being leased."""

    def __init__(self, job_id: str, code: ErrorCode, message: str) -> None:
        super().__init__(job_id, message, current="failed")
        self.code = code  # type: ignore[misc]


class IllegalTransitionError(LifecycleError):
    code = ErrorCode.ILLEGAL_TRANSITION

    def __init__(self, job_id: str, source: str, target: str, reason: str = "") -> None:
        message = f"job cannot go from {source} to {target}" + (f": {reason}" if reason else "")
        super().__init__(job_id, message, current=source)
        self.source = source
        self.target = target


class JobAlreadyTerminalError(LifecycleError):
    code = ErrorCode.JOB_ALREADY_TERMINAL

    def __init__(self, job_id: str, current: str) -> None:
        super().__init__(job_id, f"job is already {current}", current=current)


class JobLockConflictError(LifecycleError):
    code = ErrorCode.JOB_ALREADY_LOCKED

    def __init__(self, job_id: str, current: str, reason: str = "") -> None:
        detail = reason or f"job is {current}, not queued"
        super().__init__(job_id, f"job cannot be locked: {detail}", current=current)


class JobNotActiveError(LifecycleError):
    code = ErrorCode.JOB_NOT_RUNNING

    def __init__(self, job_id: str, current: str) -> None:
        super().__init__(job_id, f"job is {current}, not running", current=current)


class JobNotCancellableError(LifecycleError):
    code = ErrorCode.JOB_NOT_CANCELLABLE

    def __init__(self, job_id: str, current: str) -> None:
        super().__init__(
            job_id, f"job is {current} and can no longer be cancelled", current=current
        )


class LeaseLostError(LifecycleError):
    code = ErrorCode.LEASE_LOST

    def __init__(self, job_id: str, attempt_no: int, current: str | None = None) -> None:
        super().__init__(
            job_id, f"lease on attempt {attempt_no} is no longer held by this runtime", current
        )
        self.attempt_no = attempt_no

"""The lifecycle's value types: a job row as the scheduler reads it, and what writes return."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from scheduler_service.core.state_machine import LifecycleStatus, is_terminal, parse_status
from shared.canonical_json import canonical_json
from shared.model_catalogue import DEFAULT_MODEL

__all__ = [
    "RECORD_FIELDS",
    "ArtifactRow",
    "Beat",
    "CancelOutcome",
    "ExpiredLease",
    "HeartbeatOutcome",
    "JobError",
    "JobFilter",
    "JobRecord",
    "LeaseGrant",
    "LeasePayload",
    "LockedRows",
    "NewJob",
    "Placement",
    "StrandedJob",
    "Success",
    "WatchState",
    "watch_state",
]


class CancelOutcome(StrEnum):
    """What a cancel did: ended a queued job, or asked a running one's runtime to stop."""

    CANCELLED = "cancelled"
    CANCEL_REQUESTED = "cancel_requested"


@dataclass(frozen=True, slots=True, kw_only=True)
class NewJob:
    """A job to insert as queued; values come from the job definition and the request."""

    job_id: str
    user_id: str
    job_type: str
    queue_name: str
    priority: int
    max_attempts: int
    timeout_ms: int
    target_type: str | None = None
    target_id: str | None = None
    idempotency_key: str | None = None
    request_hash: str | None = None
    trigger_type: str = "api"
    parent_job_id: str | None = None
    #: The tree's root and the job's depth in it (0: a root).
    root_job_id: str | None = None
    tree_depth: int = 0
    #: A job that takes children: their bound running at once (0: none), its join policy.
    max_parallel: int = 0
    join_policy: str | None = None
    retried_from_job_id: str | None = None
    credential_mode: str = "platform_key"
    model_provider: str = "deepseek"
    #: The create named its model: no other tier of its type's route takes it.
    model_pinned: bool = False
    #: Tokens the job may spend of its model key's per-minute limit (core/model_keys.py).
    token_estimate: int = 0
    #: The answer's token cap (its definition's).
    max_output_tokens: int = 0
    #: W3C traceparent of the CreateJob span.
    trace_parent: str | None = None
    credential_id: str | None = None
    model_name: str = DEFAULT_MODEL
    prompt_key: str | None = None
    prompt_version: str | None = None
    input_schema_version: str | None = None
    output_schema_version: str | None = None
    snapshot_id: str | None = None
    deadline_at: datetime | None = None
    cost_policy: str = "immediate"
    #: How much the model thinks (shared/reasoning.py): the type's default or the create's.
    reasoning_effort: str = "off"
    #: What its prompt shares with its user's other jobs (a digest of the snapshot), for the
    #: provider's cache: the first job of a prefix warms it (core/warmup.py); None: no wait.
    prefix_key: str | None = None


@dataclass(frozen=True, slots=True)
class JobError:
    """Error fields of a failure: a catalogue code, a user-safe text, an operator text."""

    code: str
    public_message: str
    internal_message: str | None = None


@dataclass(frozen=True, slots=True)
class LeaseGrant:
    job_id: str
    attempt_no: int
    lock_until: datetime
    #: From the job becoming available to this lease, by the database clock.
    waited_s: float = 0.0
    #: The lease's token (its digest is on the row); never logged.
    lease_token: str = field(default="", repr=False)


@dataclass(frozen=True, slots=True)
class Placement:
    """A new job written already leased (its runtime was waiting when it was created): to
    whom, under which token, until when."""

    holder: str
    lease_token: str = field(repr=False)
    lock_until: datetime


@dataclass(frozen=True, slots=True)
class HeartbeatOutcome:
    lock_until: datetime
    cancel_requested: bool


@dataclass(frozen=True, slots=True)
class ExpiredLease:
    """A running attempt whose lease ran out, or that ran past its job type's timeout."""

    job_id: str
    job_type: str
    attempt_no: int
    max_attempts: int
    cancel_requested: bool
    #: The runtime instance that held it (and never reported it).
    holder: str | None = None
    #: Earlier attempts that went back unspent (they do not count against ``max_attempts``).
    waived_attempts: int = 0


#: What a WatchJob stream reports a change of: status, progress, attempt, cancel request, error.
WatchState = tuple[str, int, int, datetime | None, str | None]


def watch_state(
    status: str,
    progress: int,
    attempt: int,
    cancel_requested_at: datetime | None,
    error_code: str | None,
) -> WatchState:
    return (status, progress, attempt, cancel_requested_at, error_code)


@dataclass(frozen=True, slots=True)
class StrandedJob:
    """A queued or running job whose type is no longer registered: no runtime may take it."""

    job_id: str
    job_type: str
    status: LifecycleStatus
    attempt_no: int


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRecord:
    """A job row as the rest of the scheduler reads it."""

    id: str
    userId: str
    jobType: str
    lifecycleStatus: LifecycleStatus
    queueName: str
    priority: int
    progress: int
    attemptCount: int
    maxAttempts: int
    waivedAttempts: int
    timeoutMs: int
    lockedBy: str | None
    lockedAt: datetime | None
    lockUntil: datetime | None
    availableAt: datetime | None
    deadlineAt: datetime | None
    cancelRequestedAt: datetime | None
    queuedAt: datetime | None
    startedAt: datetime | None
    finishedAt: datetime | None
    createdAt: datetime
    updatedAt: datetime
    targetType: str | None
    targetId: str | None
    idempotencyKey: str | None
    requestHash: str | None
    retriedFromJobId: str | None
    errorCode: str | None
    publicErrorMessage: str | None
    internalErrorMessage: str | None
    outputHash: str | None
    validatedOutput: Any
    resultIdempotencyKey: str | None
    credentialMode: str
    credentialId: str | None
    modelProvider: str
    modelName: str
    promptKey: str | None
    promptVersion: str | None
    outputSchemaVersion: str | None
    checkpoint: bytes | None
    leaseTokenHash: str | None
    traceParent: str | None
    costPolicy: str
    triggerType: str
    parentJobId: str | None
    rootJobId: str | None
    treeDepth: int
    maxParallel: int
    joinPolicy: str | None
    childrenTotal: int
    childrenOpen: int
    #: None on rows written before jobs had an effort: off.
    reasoningEffort: str | None = None
    prefixKey: str | None = None
    prefixWarmedAt: datetime | None = None
    #: The route tier its latest lease went to (core/routes.py); whether it pinned its model.
    modelTier: str = "primary"
    modelPinned: bool = False

    @classmethod
    def from_mapping(cls, row: Mapping[str, Any]) -> JobRecord:
        values = {name: row[name] for name in RECORD_FIELDS}
        values["lifecycleStatus"] = parse_status(values["lifecycleStatus"])
        return cls(**values)

    @classmethod
    def from_rows(
        cls, columns: Sequence[str], rows: Iterable[Sequence[Any]]
    ) -> Iterator[JobRecord]:
        """A record per row of a result whose ``columns`` are named once (a row's mapping view
        builds its keys again for every row of a locked batch)."""
        position = {name: index for index, name in enumerate(columns)}
        where = [position[name] for name in RECORD_FIELDS]
        status = RECORD_FIELDS.index("lifecycleStatus")
        for row in rows:
            values = [row[index] for index in where]
            values[status] = parse_status(values[status])
            yield cls(**dict(zip(RECORD_FIELDS, values, strict=True)))

    @property
    def is_terminal(self) -> bool:
        return is_terminal(self.lifecycleStatus)

    def watch_state(self) -> WatchState:
        return watch_state(
            self.lifecycleStatus.value,
            self.progress,
            self.attemptCount,
            self.cancelRequestedAt,
            self.errorCode,
        )


RECORD_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(JobRecord))


@dataclass(frozen=True, slots=True)
class ArtifactRow:
    artifact_type: str
    artifact_id: str


@dataclass(frozen=True, slots=True)
class LeasePayload:
    """What a lease hands its runtime."""

    job_id: str
    job_type: str
    attempt_no: int
    lock_until: datetime
    timeout_ms: int
    snapshot: dict[str, Any]
    params: dict[str, Any]
    prompt_key: str
    prompt_version: str
    model_name: str
    credential_mode: str
    credential_id: str
    output_schema_version: str
    #: The answer's token cap; 0: none.
    max_output_tokens: int = 0
    #: W3C traceparent the runtime continues (empty: no trace).
    traceparent: str = ""
    #: The lease's token, handed to its runtime only (never logged, stored as a digest).
    lease_token: str = field(default="", repr=False)
    #: The job's user, as the model provider is told of them (core/provider_ids.py); the raw
    #: id stays in ``user_id``, which no lease carries.
    provider_user_id: str = ""
    user_id: str = field(default="", repr=False)
    #: The text an earlier attempt wrote, for this one to continue (empty: start over).
    resume_output: str = field(default="", repr=False)
    #: The runtime sends the answer's text as it is written (the job type streams it).
    stream_output: bool = False
    #: How much the model thinks (shared/reasoning.py).
    reasoning_effort: str = "off"
    #: Jobs may wait to share its prompt's prefix: its first token is told at once.
    tell_first_token: bool = False
    #: The provider serving ``model_name``, and the route tier the lease went to.
    model_provider: str = "deepseek"
    model_tier: str = "primary"


@dataclass(frozen=True, slots=True, kw_only=True)
class JobFilter:
    """What ListJobs narrows to; ``user_id`` is the caller for JobService, optional for admins."""

    user_id: str | None = None
    job_type: str = ""
    lifecycle_status: str = ""
    queue_name: str = ""
    created_after: datetime | None = None
    created_before: datetime | None = None
    #: Only jobs whose last error has this code.
    error_code: str = ""
    #: Only the children of this job.
    parent_job_id: str = ""

    def scope(self) -> str:
        return hashlib.sha256(
            canonical_json(
                asdict(self)
                | {
                    "created_after": self.created_after.isoformat() if self.created_after else None,
                    "created_before": self.created_before.isoformat()
                    if self.created_before
                    else None,
                }
            )
        ).hexdigest()


@dataclass(frozen=True, slots=True)
class LockedRows:
    """Jobs read with their row locks held to the end of the transaction, and the database clock
    at that moment; decisions made on them cannot be overtaken by another writer."""

    now: datetime
    jobs: dict[str, JobRecord]
    lease_ttl_ms: int
    lease_grace_ms: int


@dataclass(frozen=True, slots=True)
class Success:
    """One accepted result of a batch: the SUCCEED write's parameters."""

    job_id: str
    attempt_no: int
    holder: str
    output_hash: str
    key: str
    output: Any


@dataclass(frozen=True, slots=True)
class Beat:
    """One heartbeat of a batch: the HEARTBEAT write's parameters."""

    job_id: str
    attempt_no: int
    holder: str
    progress: int

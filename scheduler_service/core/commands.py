"""What callers ask of the job API, as domain values: a create, a list filter, the limits."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from datetime import datetime
from typing import Any

from scheduler_service.core.records import JobFilter
from scheduler_service.core.trees import TreeLimits
from scheduler_service.core.warmup import WarmupPolicy
from shared.canonical_json import canonical_json

__all__ = ["CreateJobCommand", "JobFilter", "JobLimits", "QueueStats"]


@dataclass(frozen=True, slots=True)
class JobLimits:
    max_active_jobs_per_user: int = 100
    daily_job_quota_per_user: int = 10_000
    max_snapshot_bytes: int = 1024 * 1024
    #: An off-peak job's schedule-to-start deadline when its create names none.
    off_peak_deadline_s: float = 6 * 3600
    #: Bounds of job trees.
    tree: TreeLimits = field(default_factory=TreeLimits)
    #: Jobs sharing a prompt prefix wait for its first call to warm the provider's cache.
    warmup: WarmupPolicy = field(default_factory=WarmupPolicy)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateJobCommand:
    user_id: str
    job_type: str
    target_type: str = ""
    target_id: str = ""
    snapshot: dict[str, Any]
    params: dict[str, Any]
    idempotency_key: str = ""
    priority: int | None = None
    credential_mode: str = ""
    credential_id: str = ""
    deadline: datetime | None = None
    #: A model the job type allows instead of its default ("": the default).
    model: str = ""
    #: ``immediate`` or ``off_peak`` ("": the job type's default).
    cost_policy: str = ""
    #: W3C traceparent of the create's span (not part of the request: a retry of the same
    #: create in another trace is the same request).
    traceparent: str = ""

    retried_from_job_id: str = ""
    #: The parent this job is a child of ("": none), and on a job that takes children, their
    #: bound running at once (0: its type's) and the join policy ("": its type's).
    parent_job_id: str = ""
    max_parallel: int = 0
    join_policy: str = ""
    #: How the job came to be ("": a caller's create); a split's children and a retried tree's
    #: parent say so.
    trigger_type: str = ""
    #: How much the model thinks ("": the job type's default).
    reasoning_effort: str = ""

    def idempotency_key_tuple(self) -> tuple[str, str, str] | None:
        """(user, job type, key) when the create carries an idempotency key."""
        if not self.idempotency_key:
            return None
        return self.user_id, self.job_type, self.idempotency_key

    def fingerprint(self) -> str:
        """What makes two creates "the same request" for the idempotency check."""
        # Shallow: asdict would deep-copy the snapshot only for it to be serialised.
        fields = {f.name: getattr(self, f.name) for f in dataclass_fields(self)}
        fields["deadline"] = self.deadline.isoformat() if self.deadline else None
        del fields["traceparent"]
        if not self.model:
            del fields["model"]  # the default model: the fingerprint rows written before had
        if not self.cost_policy:
            del fields["cost_policy"]  # likewise the default cost policy
        for tree_field in (
            "parent_job_id",
            "max_parallel",
            "join_policy",
            "trigger_type",
            "reasoning_effort",
        ):
            if not fields[tree_field]:
                del fields[tree_field]  # likewise a job outside any tree, the default effort
        return hashlib.sha256(canonical_json(fields)).hexdigest()


@dataclass(frozen=True, slots=True)
class QueueStats:
    depths: list[tuple[str, str, str, int]]
    oldest_queued_s: dict[str, float]
    running: int
    dead_events: int
    pending_events: int
    outbox_lag_s: float
    #: Off-peak jobs waiting out a peak window, per queue.
    deferred: dict[str, int] = field(default_factory=dict)
    #: Jobs that ended in the last hour: (queue, job type, status, count).
    finished_last_hour: list[tuple[str, str, str, int]] = field(default_factory=list)

"""A new job from a create request: every check that needs no database (its type, ids and
sizes, the snapshot and params against their schemas, priority, credential mode, model), the
defaults of its type applied, and the request's fingerprint that makes a repeat recognisable."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

from scheduler_service.core import validation
from scheduler_service.core.cheap_hours import IMMEDIATE, OFF_PEAK, POLICIES
from scheduler_service.core.commands import CreateJobCommand, JobLimits
from scheduler_service.core.errors import IdempotencyKeyReusedError, InvalidRequestError
from scheduler_service.core.ids import new_id
from scheduler_service.core.job_definitions import CREDENTIAL_MODES
from scheduler_service.core.job_registry import JobRegistry
from scheduler_service.core.model_keys import estimate_tokens
from scheduler_service.core.records import JobRecord, NewJob
from scheduler_service.core.trees import JoinPolicy
from scheduler_service.core.warmup import prefix_key
from shared.canonical_json import canonical_json
from shared.error_codes import ErrorCode

__all__ = ["new_job_of", "retry_command", "same_request"]

MAX_ID_FIELD = 191
JOIN_POLICIES = tuple(policy.value for policy in JoinPolicy)


def new_job_of(
    cmd: CreateJobCommand, registry: JobRegistry, limits: JobLimits, now: datetime | None = None
) -> tuple[NewJob, dict[str, Any], dict[str, Any]]:
    """The job ``cmd`` asks for, validated against its type, with its snapshot and params as
    stored: every check that needs no database, raising the error CreateJob answers. ``now``
    (the database's) dates an off-peak job's default deadline."""
    definition = registry.get(cmd.job_type)
    validation.user_id(cmd.user_id)
    validation.idempotency_key(cmd.idempotency_key)
    _bounded(cmd.target_type, "target_type", limit=32)
    _bounded(cmd.target_id, "target_id", limit=255)
    _bounded(cmd.credential_id, "credential_id", limit=255)
    _bounded(cmd.model, "model", limit=64)
    validation.json_value(cmd.snapshot, "snapshot", ErrorCode.INVALID_SNAPSHOT, lease_numbers=True)
    validation.json_value(cmd.params, "params", ErrorCode.INVALID_PARAMS, lease_numbers=True)
    snapshot_bytes = len(canonical_json(cmd.snapshot))
    if snapshot_bytes > limits.max_snapshot_bytes:
        raise InvalidRequestError(
            f"snapshot is larger than {limits.max_snapshot_bytes} bytes",
            field="snapshot",
            code=ErrorCode.INVALID_SNAPSHOT,
        )
    snapshot = validation.against_schema(
        registry.input_schema(cmd.job_type),
        cmd.snapshot,
        "snapshot",
        ErrorCode.INVALID_SNAPSHOT,
    )
    params = validation.against_schema(
        registry.params_schema(cmd.job_type),
        cmd.params,
        "params",
        ErrorCode.INVALID_PARAMS,
    )
    priority = definition.routing.default_priority if cmd.priority is None else cmd.priority
    if not 0 <= priority <= 100:
        raise InvalidRequestError("priority must be between 0 and 100", field="priority")
    mode = cmd.credential_mode or definition.credential.default_mode
    if mode not in CREDENTIAL_MODES or mode not in definition.credential.allowed_modes:
        raise InvalidRequestError("credential_mode is not allowed", field="credential_mode")
    if mode == "user_deepseek_key" and not cmd.credential_id:
        raise InvalidRequestError("credential_id is required", field="credential_id")
    model = cmd.model or definition.model_name
    if model != definition.model_name and model not in definition.allowed_models:
        allowed = ", ".join([definition.model_name, *definition.allowed_models])
        raise InvalidRequestError(
            f"model is not allowed for this job type (allowed: {allowed})", field="model"
        )
    policy = cmd.cost_policy or definition.cost_policy
    if policy not in POLICIES:
        raise InvalidRequestError("cost_policy is not a known policy", field="cost_policy")
    effort = cmd.reasoning_effort or definition.reasoning
    if effort not in definition.reasoning_allowed:
        raise InvalidRequestError(
            f"reasoning_effort {effort} is not allowed for this job type (allowed: "
            f"{', '.join(definition.reasoning_allowed)})",
            field="reasoning_effort",
        )
    if cmd.join_policy not in ("", *JOIN_POLICIES):
        raise InvalidRequestError("join_policy is not a known policy", field="join_policy")
    if cmd.parent_job_id and not cmd.parent_job_id.startswith("#"):  # "#N": an item of the call
        validation.job_id(cmd.parent_job_id, "parent_job_id")
    if not 0 <= cmd.max_parallel <= limits.tree.max_parallel:
        raise InvalidRequestError(
            f"max_parallel must be 0 to {limits.tree.max_parallel} (AIJOB_TREE_MAX_PARALLEL)",
            field="max_parallel",
        )
    stored_snapshot = snapshot.model_dump(mode="json")
    deadline = cmd.deadline
    if deadline is None and policy == OFF_PEAK and now is not None:
        deadline = now + timedelta(seconds=limits.off_peak_deadline_s)
    new_job = NewJob(
        job_id=new_id(),
        user_id=cmd.user_id,
        job_type=cmd.job_type,
        queue_name=definition.routing.queue_name,
        priority=priority,
        max_attempts=definition.execution.max_attempts,
        timeout_ms=definition.execution.timeout_ms,
        target_type=cmd.target_type or None,
        target_id=cmd.target_id or None,
        idempotency_key=cmd.idempotency_key or None,
        request_hash=dataclasses.replace(
            cmd,
            priority=priority,
            credential_mode=mode,
            # Naming the default model is the same request as naming none.
            model="" if model == definition.model_name else model,
            reasoning_effort="" if effort == definition.reasoning else effort,
            snapshot=stored_snapshot,
            params=params.model_dump(mode="json"),
        ).fingerprint(),
        credential_mode=mode,
        credential_id=cmd.credential_id or None,
        model_name=model,
        model_provider=definition.model_provider,
        model_pinned=bool(cmd.model),
        max_output_tokens=definition.max_output_tokens,
        trace_parent=cmd.traceparent or None,
        token_estimate=estimate_tokens(
            snapshot_bytes + len(canonical_json(cmd.params)), definition.max_output_tokens
        ),
        prompt_key=definition.prompt_key,
        prompt_version=definition.prompt_version,
        input_schema_version=definition.input.version,
        output_schema_version=definition.output.version,
        deadline_at=deadline,
        cost_policy=policy,
        retried_from_job_id=cmd.retried_from_job_id or None,
        parent_job_id=cmd.parent_job_id or None,
        trigger_type=cmd.trigger_type or "api",
        max_parallel=cmd.max_parallel or definition.tree.max_parallel,
        join_policy=cmd.join_policy or None,
        reasoning_effort=effort,
        # Rendered only for a snapshot long enough to share (a cost on every create else).
        prefix_key=prefix_key(
            limits.warmup,
            definition.prompt_version,
            canonical_json(stored_snapshot),
            explicit_immediate=cmd.cost_policy == IMMEDIATE,
        )
        if snapshot_bytes >= limits.warmup.min_snapshot_bytes
        else None,
    )
    return new_job, stored_snapshot, params.model_dump(mode="json")


def same_request(existing: JobRecord, new_job: NewJob, cmd: CreateJobCommand) -> JobRecord:
    """The first job when ``cmd`` asks for the same thing once defaults are applied (an
    explicit default priority is the same request); rows written before defaults were part
    of the fingerprint hold the literal request's."""
    if existing.requestHash not in (new_job.request_hash, cmd.fingerprint()):
        raise IdempotencyKeyReusedError
    return existing


def _bounded(value: str, field: str, *, limit: int = MAX_ID_FIELD, required: bool = False) -> None:
    if required and not value:
        raise InvalidRequestError(f"{field} is required", field=field)
    if len(value) > limit:
        raise InvalidRequestError(f"{field} is longer than {limit} characters", field=field)


def retry_command(
    source: JobRecord, snapshot: dict[str, Any], params: dict[str, Any], **fields: Any
) -> CreateJobCommand:
    """A new job with the input of ``source`` (RetryJob): its repeats find the same job."""
    return CreateJobCommand(
        user_id=source.userId,
        job_type=source.jobType,
        target_type=source.targetType or "",
        target_id=source.targetId or "",
        snapshot=snapshot,
        params=params,
        idempotency_key=f"retry:{source.id}",
        priority=source.priority,
        credential_mode=source.credentialMode,
        credential_id=source.credentialId or "",
        model=source.modelName,
        retried_from_job_id=source.id,
        max_parallel=source.maxParallel,
        join_policy=source.joinPolicy or "",
        reasoning_effort=source.reasoningEffort or "",
        **fields,
    )

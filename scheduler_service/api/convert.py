"""Protobuf <-> domain conversions. Proto types stop here."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2

from scheduler_service.core import validation
from scheduler_service.core.cheap_hours import IMMEDIATE, OFF_PEAK
from scheduler_service.core.commands import CreateJobCommand
from scheduler_service.core.errors import InvalidRequestError
from scheduler_service.core.job_catalog import JobTypeInfo
from scheduler_service.core.log_throttle import LogThrottle
from scheduler_service.core.records import ArtifactRow, JobRecord, LeasePayload
from scheduler_service.core.routes import PRIMARY
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.core.trees import ChildSummary
from scheduler_service.core.usage import Usage
from scheduler_service.services.trees import JobTree
from shared.error_codes import ErrorCode
from shared.gen.aijob.v1 import job_service_pb2, types_pb2
from shared.poll_frames import LEASE_BYTES

log = logging.getLogger(__name__)
_USAGE_CUT = LogThrottle()

_EPOCH = datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=UTC)


def timestamp(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    """A protobuf Timestamp for a naive-UTC database time (None stays unset)."""
    if value is None:
        return None
    # What Timestamp.FromDatetime computes, at a third of its cost (every lease and every job
    # message carries several): a timedelta's seconds and microseconds are never negative,
    # as a Timestamp's nanos must not be.
    since = value - (_EPOCH if value.tzinfo is None else _EPOCH_UTC)
    return timestamp_pb2.Timestamp(
        seconds=since.days * 86_400 + since.seconds, nanos=since.microseconds * 1_000
    )


def from_timestamp(value: timestamp_pb2.Timestamp, present: bool, field: str) -> datetime | None:
    """Naive UTC, like the database columns; INVALID_ARGUMENT naming ``field`` when the value
    is not a valid Timestamp (nanos outside [0, 1e9), seconds outside years 1-9999)."""
    if not present:
        return None
    try:
        return value.ToDatetime(tzinfo=UTC).replace(tzinfo=None)
    except (ValueError, OverflowError):
        raise InvalidRequestError(f"{field} is not a valid timestamp", field=field) from None


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    # Struct.update takes the same JSON values as json_format.ParseDict for less than half its
    # cost (two per lease; tests/unit/test_row_conversions.py).
    message = struct_pb2.Struct()
    message.update(value)
    return message


def create_command(request: job_service_pb2.CreateJobRequest, user_id: str) -> CreateJobCommand:
    """A CreateJob request (alone or as a CreateJobs item) for ``user_id``."""
    return CreateJobCommand(
        user_id=user_id,
        job_type=request.job_type,
        target_type=request.target_type,
        target_id=request.target_id,
        snapshot=_object_of(request, "snapshot", ErrorCode.INVALID_SNAPSHOT),
        params=_object_of(request, "params", ErrorCode.INVALID_PARAMS),
        idempotency_key=request.idempotency_key,
        priority=request.priority if request.HasField("priority") else None,
        credential_mode=request.credential_mode,
        credential_id=request.credential_id,
        deadline=from_timestamp(request.deadline, request.HasField("deadline"), "deadline"),
        model=request.model,
        cost_policy=cost_policy(request.cost_policy),
        parent_job_id=request.parent_job_id,
        max_parallel=request.max_parallel,
        join_policy=join_policy(request.join_policy),
        reasoning_effort=reasoning_effort(request.reasoning_effort),
    )


def _object_of(
    request: job_service_pb2.CreateJobRequest, name: str, code: ErrorCode
) -> dict[str, Any]:
    """The ``snapshot`` or ``params`` of a create, from its Struct or its ``*_json`` string (one
    form only, a JSON object)."""
    text: str = getattr(request, f"{name}_json")
    if not text:
        return from_struct(getattr(request, name))
    if request.HasField(name) and getattr(request, name).fields:
        raise InvalidRequestError(
            f"give {name} or {name}_json, not both", field=f"{name}_json", code=code
        )
    value = validation.json_document(text, f"{name}_json", code)
    if not isinstance(value, dict):
        raise InvalidRequestError(
            f"{name}_json must be a JSON object", field=f"{name}_json", code=code
        )
    return value


def from_struct(message: struct_pb2.Struct) -> dict[str, Any]:
    """A Struct as plain values, as it came: a NaN or an infinity stays a float, for the domain's
    validation to refuse with its own code and field (json_format would raise ValueError)."""
    return {key: _plain(value) for key, value in message.fields.items()}


def _plain(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return from_struct(value.struct_value)
    if kind == "list_value":
        return [_plain(item) for item in value.list_value.values]
    if kind is None or kind == "null_value":
        return None
    return getattr(value, kind)


def lease(payload: LeasePayload, max_bytes: int = LEASE_BYTES) -> types_pb2.Lease:
    """The lease message, never larger than ``max_bytes`` for the sake of the text it resumes:
    that text is cut to what fits (a prefix to continue from is still one), so a lease that
    carries it can always be delivered."""
    message = _lease(payload)
    excess = message.ByteSize() - max_bytes
    if excess > 0 and payload.resume_output:
        message.resume_output = utf8_prefix(payload.resume_output, excess)
    return message


def utf8_prefix(text: str, fewer_bytes: int) -> str:
    """``text`` cut by at least ``fewer_bytes`` of its UTF-8 form, at a character boundary."""
    encoded = text.encode()
    keep = max(0, len(encoded) - fewer_bytes)
    return encoded[:keep].decode(errors="ignore")


def _lease(payload: LeasePayload) -> types_pb2.Lease:
    return types_pb2.Lease(
        job_id=payload.job_id,
        job_type=payload.job_type,
        attempt_no=payload.attempt_no,
        lock_until=timestamp(payload.lock_until),
        timeout_ms=payload.timeout_ms,
        snapshot=struct(payload.snapshot),
        params=struct(payload.params),
        prompt_key=payload.prompt_key,
        prompt_version=payload.prompt_version,
        model_name=payload.model_name,
        credential_mode=payload.credential_mode,
        credential_id=payload.credential_id,
        output_schema_version=payload.output_schema_version,
        lease_token=payload.lease_token,
        max_output_tokens=payload.max_output_tokens,
        traceparent=payload.traceparent,
        provider_user_id=payload.provider_user_id,
        resume_output=payload.resume_output,
        stream_output=payload.stream_output,
        reasoning_effort=_ENUM_OF_EFFORT.get(
            payload.reasoning_effort, types_pb2.REASONING_EFFORT_OFF
        ),
        tell_first_token=payload.tell_first_token,
        model_provider=payload.model_provider,
        model_tier=payload.model_tier,
    )


def job_type(info: JobTypeInfo) -> job_service_pb2.JobType:
    d = info.definition
    modes = [d.credential.default_mode] + [
        m for m in d.credential.allowed_modes if m != d.credential.default_mode
    ]
    return job_service_pb2.JobType(
        job_type=d.job_type,
        label=d.metadata.label,
        description=d.metadata.description,
        queue_name=d.routing.queue_name,
        default_priority=d.routing.default_priority,
        timeout_ms=d.execution.timeout_ms,
        max_attempts=d.execution.max_attempts,
        backoff_base_ms=d.execution.backoff.base_ms,
        model_name=d.model_name,
        allowed_models=list(d.allowed_models),
        credential_modes=modes,
        max_output_tokens=d.max_output_tokens,
        snapshot_schema_json=json.dumps(info.input_schema, ensure_ascii=False),
        params_schema_json=json.dumps(info.params_schema, ensure_ascii=False),
        output_schema_json=json.dumps(info.output_schema, ensure_ascii=False),
        reasoning_effort=_ENUM_OF_EFFORT[d.reasoning],
        allowed_reasoning_efforts=[_ENUM_OF_EFFORT[e] for e in d.reasoning_allowed],
    )


def usage(message: types_pb2.Usage, present: bool) -> Usage | None:
    """The usage a runtime reported, its counts within what the ledger records: they come from
    the provider's answer, so a count out of range is cut and logged, never refused (the job's
    answer stands)."""
    if not present:
        return None
    reported, cut = _usage(message).bounded()
    if cut and (suppressed := _USAGE_CUT.admit("usage")) is not None:
        log.warning(
            "a runtime reported usage counts beyond what one call can use; recorded at the bound",
            extra={"action": "usage_cut", "suppressed": suppressed},
        )
    return reported


def _usage(message: types_pb2.Usage) -> Usage:
    return Usage(
        model_name=message.model_name,
        prompt_tokens=max(0, message.prompt_tokens),
        completion_tokens=max(0, message.completion_tokens),
        latency_ms=max(0, message.latency_ms),
        cost_micros=max(0, message.cost_micros),
        exhausted_for_ms=(
            exhausted_for_ms(message.rate_limits) if message.HasField("rate_limits") else None
        ),
        first_token_ms=message.time_to_first_token_ms
        if message.time_to_first_token_ms > 0
        else None,
        cached_prompt_tokens=min(
            max(0, message.cached_prompt_tokens), max(0, message.prompt_tokens)
        ),
        reasoning_tokens=min(max(0, message.reasoning_tokens), max(0, message.completion_tokens)),
    )


def exhausted_for_ms(limits: types_pb2.ProviderRateLimits) -> int | None:
    """How long the provider's headers say nothing remains (the longer window), or None."""
    waits = [
        max(0, reset.ToMilliseconds())
        for remaining, reset in (
            ("remaining_requests", limits.reset_requests),
            ("remaining_tokens", limits.reset_tokens),
        )
        if limits.HasField(remaining) and getattr(limits, remaining) <= 0
    ]
    return max(waits) if waits else None


_POLICY_OF_ENUM: dict[int, str] = {
    types_pb2.COST_POLICY_UNSPECIFIED: "",
    types_pb2.COST_POLICY_IMMEDIATE: IMMEDIATE,
    types_pb2.COST_POLICY_OFF_PEAK: OFF_PEAK,
}
_ENUM_OF_POLICY = {
    IMMEDIATE: types_pb2.COST_POLICY_IMMEDIATE,
    OFF_PEAK: types_pb2.COST_POLICY_OFF_PEAK,
}


_EFFORT_OF_ENUM: dict[types_pb2.ReasoningEffort, str] = {
    types_pb2.REASONING_EFFORT_UNSPECIFIED: "",
    types_pb2.REASONING_EFFORT_OFF: "off",
    types_pb2.REASONING_EFFORT_LOW: "low",
    types_pb2.REASONING_EFFORT_HIGH: "high",
    types_pb2.REASONING_EFFORT_MAX: "max",
}
_ENUM_OF_EFFORT: dict[str, types_pb2.ReasoningEffort] = {
    effort: value for value, effort in _EFFORT_OF_ENUM.items() if effort
}


def reasoning_effort(value: types_pb2.ReasoningEffort) -> str:
    """A create's reasoning effort ("" takes the job type's default)."""
    if value not in _EFFORT_OF_ENUM:
        raise InvalidRequestError(
            "reasoning_effort is not a known effort", field="reasoning_effort"
        )
    return _EFFORT_OF_ENUM[value]


_JOIN_POLICY_OF_ENUM: dict[int, str] = {
    job_service_pb2.JOIN_POLICY_UNSPECIFIED: "",
    job_service_pb2.JOIN_POLICY_ALL_SUCCESS: "all_success",
    job_service_pb2.JOIN_POLICY_ALL_DONE: "all_done",
}


def join_policy(value: int) -> str:
    """A create's join policy ("" takes the job type's default)."""
    if value not in _JOIN_POLICY_OF_ENUM:
        raise InvalidRequestError("join_policy is not a known policy", field="join_policy")
    return _JOIN_POLICY_OF_ENUM[value]


def child_counts(counts: dict[str, int]) -> types_pb2.ChildCounts:
    """A parent's children by status, as ``Job.children``."""
    fields = types_pb2.ChildCounts.DESCRIPTOR.fields_by_name
    return types_pb2.ChildCounts(**{status: counts.get(status, 0) for status in fields})


def cost_policy(value: int) -> str:
    """A create's cost policy ("" takes the job type's default)."""
    if value not in _POLICY_OF_ENUM:
        raise InvalidRequestError("cost_policy is not a known policy", field="cost_policy")
    return _POLICY_OF_ENUM[value]


def job(
    record: JobRecord,
    artifacts: list[ArtifactRow] | None = None,
    *,
    internal: bool = False,
    deferred_until: datetime | None = None,
    children: ChildSummary | None = None,
) -> types_pb2.Job:
    message = types_pb2.Job(
        job_id=record.id,
        job_type=record.jobType,
        lifecycle_status=record.lifecycleStatus.value,
        queue_name=record.queueName,
        priority=record.priority,
        progress=record.progress,
        attempt_count=record.attemptCount,
        max_attempts=record.maxAttempts,
        waived_attempts=record.waivedAttempts,
        model_name=record.modelName,
        model_provider=record.modelProvider,
        user_id=record.userId,
        target_type=record.targetType or "",
        target_id=record.targetId or "",
        created_at=timestamp(record.createdAt),
        started_at=timestamp(record.startedAt),
        finished_at=timestamp(record.finishedAt),
        error_code=record.errorCode or "",
        public_error_message=record.publicErrorMessage or "",
        internal_error_message=(record.internalErrorMessage or "") if internal else "",
        retried_from_job_id=record.retriedFromJobId or "",
        cancel_requested_at=timestamp(record.cancelRequestedAt),
        deadline_at=timestamp(record.deadlineAt),
        cost_policy=_ENUM_OF_POLICY.get(record.costPolicy, types_pb2.COST_POLICY_IMMEDIATE),
        deferred_until=timestamp(deferred_until),
        parent_job_id=record.parentJobId or "",
        root_job_id=record.rootJobId or record.id,
        reasoning_effort=_ENUM_OF_EFFORT.get(
            record.reasoningEffort or "off", types_pb2.REASONING_EFFORT_OFF
        ),
        model_tier=record.modelTier or PRIMARY,
    )
    if children is not None:
        message.children.CopyFrom(child_counts(children.counts))
    if record.lifecycleStatus is LifecycleStatus.QUEUED:
        message.available_at.CopyFrom(timestamp(record.availableAt) or timestamp_pb2.Timestamp())
    if artifacts is not None and record.lifecycleStatus is LifecycleStatus.SUCCEEDED:
        message.result.CopyFrom(
            types_pb2.JobResult(
                artifact_count=len(artifacts),
                artifacts=[
                    types_pb2.ArtifactRef(artifact_type=a.artifact_type, artifact_id=a.artifact_id)
                    for a in artifacts
                ],
                output_hash=record.outputHash or "",
                output_json=json.dumps(record.validatedOutput, ensure_ascii=False)
                if record.validatedOutput is not None
                else "",
                failed_children=[
                    types_pb2.FailedChild(job_id=job_id, error_code=code)
                    for job_id, code in (children.unsuccessful if children else ())
                ],
            )
        )
    return message


def job_tree(tree: JobTree) -> job_service_pb2.GetJobTreeResponse:
    usage = tree.usage
    return job_service_pb2.GetJobTreeResponse(
        nodes=[
            job_service_pb2.TreeNode(
                job_id=n.job_id,
                parent_job_id=n.parent_job_id or "",
                job_type=n.job_type,
                lifecycle_status=n.lifecycle_status,
                attempt_count=n.attempt_count,
                error_code=n.error_code or "",
            )
            for n in tree.nodes
        ],
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cached_prompt_tokens=usage.cached_prompt_tokens,
        cost_micros=usage.cost_micros,
    )

import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CostPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COST_POLICY_UNSPECIFIED: _ClassVar[CostPolicy]
    COST_POLICY_IMMEDIATE: _ClassVar[CostPolicy]
    COST_POLICY_OFF_PEAK: _ClassVar[CostPolicy]

class ReasoningEffort(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REASONING_EFFORT_UNSPECIFIED: _ClassVar[ReasoningEffort]
    REASONING_EFFORT_OFF: _ClassVar[ReasoningEffort]
    REASONING_EFFORT_LOW: _ClassVar[ReasoningEffort]
    REASONING_EFFORT_HIGH: _ClassVar[ReasoningEffort]
    REASONING_EFFORT_MAX: _ClassVar[ReasoningEffort]
COST_POLICY_UNSPECIFIED: CostPolicy
COST_POLICY_IMMEDIATE: CostPolicy
COST_POLICY_OFF_PEAK: CostPolicy
REASONING_EFFORT_UNSPECIFIED: ReasoningEffort
REASONING_EFFORT_OFF: ReasoningEffort
REASONING_EFFORT_LOW: ReasoningEffort
REASONING_EFFORT_HIGH: ReasoningEffort
REASONING_EFFORT_MAX: ReasoningEffort

class Job(_message.Message):
    __slots__ = ("job_id", "job_type", "lifecycle_status", "queue_name", "priority", "progress", "attempt_count", "max_attempts", "user_id", "target_type", "target_id", "created_at", "started_at", "finished_at", "error_code", "public_error_message", "internal_error_message", "retried_from_job_id", "result", "cancel_requested_at", "available_at", "deadline_at", "waived_attempts", "model_name", "model_provider", "cost_policy", "deferred_until", "parent_job_id", "root_job_id", "children", "reasoning_effort", "model_tier")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    LIFECYCLE_STATUS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_NAME_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_TYPE_FIELD_NUMBER: _ClassVar[int]
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    INTERNAL_ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRIED_FROM_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_AT_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_AT_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_AT_FIELD_NUMBER: _ClassVar[int]
    WAIVED_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    MODEL_NAME_FIELD_NUMBER: _ClassVar[int]
    MODEL_PROVIDER_FIELD_NUMBER: _ClassVar[int]
    COST_POLICY_FIELD_NUMBER: _ClassVar[int]
    DEFERRED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    PARENT_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROOT_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    REASONING_EFFORT_FIELD_NUMBER: _ClassVar[int]
    MODEL_TIER_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_type: str
    lifecycle_status: str
    queue_name: str
    priority: int
    progress: int
    attempt_count: int
    max_attempts: int
    user_id: str
    target_type: str
    target_id: str
    created_at: _timestamp_pb2.Timestamp
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    error_code: str
    public_error_message: str
    internal_error_message: str
    retried_from_job_id: str
    result: JobResult
    cancel_requested_at: _timestamp_pb2.Timestamp
    available_at: _timestamp_pb2.Timestamp
    deadline_at: _timestamp_pb2.Timestamp
    waived_attempts: int
    model_name: str
    model_provider: str
    cost_policy: CostPolicy
    deferred_until: _timestamp_pb2.Timestamp
    parent_job_id: str
    root_job_id: str
    children: ChildCounts
    reasoning_effort: ReasoningEffort
    model_tier: str
    def __init__(self, job_id: _Optional[str] = ..., job_type: _Optional[str] = ..., lifecycle_status: _Optional[str] = ..., queue_name: _Optional[str] = ..., priority: _Optional[int] = ..., progress: _Optional[int] = ..., attempt_count: _Optional[int] = ..., max_attempts: _Optional[int] = ..., user_id: _Optional[str] = ..., target_type: _Optional[str] = ..., target_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., error_code: _Optional[str] = ..., public_error_message: _Optional[str] = ..., internal_error_message: _Optional[str] = ..., retried_from_job_id: _Optional[str] = ..., result: _Optional[_Union[JobResult, _Mapping]] = ..., cancel_requested_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., available_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., deadline_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., waived_attempts: _Optional[int] = ..., model_name: _Optional[str] = ..., model_provider: _Optional[str] = ..., cost_policy: _Optional[_Union[CostPolicy, str]] = ..., deferred_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., parent_job_id: _Optional[str] = ..., root_job_id: _Optional[str] = ..., children: _Optional[_Union[ChildCounts, _Mapping]] = ..., reasoning_effort: _Optional[_Union[ReasoningEffort, str]] = ..., model_tier: _Optional[str] = ...) -> None: ...

class ChildCounts(_message.Message):
    __slots__ = ("queued", "running", "waiting", "succeeded", "failed", "cancelled")
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    queued: int
    running: int
    waiting: int
    succeeded: int
    failed: int
    cancelled: int
    def __init__(self, queued: _Optional[int] = ..., running: _Optional[int] = ..., waiting: _Optional[int] = ..., succeeded: _Optional[int] = ..., failed: _Optional[int] = ..., cancelled: _Optional[int] = ...) -> None: ...

class JobResult(_message.Message):
    __slots__ = ("artifact_count", "artifacts", "output_hash", "output_json", "failed_children")
    ARTIFACT_COUNT_FIELD_NUMBER: _ClassVar[int]
    ARTIFACTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_HASH_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    FAILED_CHILDREN_FIELD_NUMBER: _ClassVar[int]
    artifact_count: int
    artifacts: _containers.RepeatedCompositeFieldContainer[ArtifactRef]
    output_hash: str
    output_json: str
    failed_children: _containers.RepeatedCompositeFieldContainer[FailedChild]
    def __init__(self, artifact_count: _Optional[int] = ..., artifacts: _Optional[_Iterable[_Union[ArtifactRef, _Mapping]]] = ..., output_hash: _Optional[str] = ..., output_json: _Optional[str] = ..., failed_children: _Optional[_Iterable[_Union[FailedChild, _Mapping]]] = ...) -> None: ...

class FailedChild(_message.Message):
    __slots__ = ("job_id", "error_code")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    error_code: str
    def __init__(self, job_id: _Optional[str] = ..., error_code: _Optional[str] = ...) -> None: ...

class ArtifactRef(_message.Message):
    __slots__ = ("artifact_type", "artifact_id")
    ARTIFACT_TYPE_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_ID_FIELD_NUMBER: _ClassVar[int]
    artifact_type: str
    artifact_id: str
    def __init__(self, artifact_type: _Optional[str] = ..., artifact_id: _Optional[str] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("model_name", "prompt_tokens", "completion_tokens", "latency_ms", "cost_micros", "rate_limits", "time_to_first_token_ms", "cached_prompt_tokens", "reasoning_tokens")
    MODEL_NAME_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMITS_FIELD_NUMBER: _ClassVar[int]
    TIME_TO_FIRST_TOKEN_MS_FIELD_NUMBER: _ClassVar[int]
    CACHED_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    model_name: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int
    cost_micros: int
    rate_limits: ProviderRateLimits
    time_to_first_token_ms: int
    cached_prompt_tokens: int
    reasoning_tokens: int
    def __init__(self, model_name: _Optional[str] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., latency_ms: _Optional[int] = ..., cost_micros: _Optional[int] = ..., rate_limits: _Optional[_Union[ProviderRateLimits, _Mapping]] = ..., time_to_first_token_ms: _Optional[int] = ..., cached_prompt_tokens: _Optional[int] = ..., reasoning_tokens: _Optional[int] = ...) -> None: ...

class ProviderRateLimits(_message.Message):
    __slots__ = ("limit_requests", "remaining_requests", "reset_requests", "limit_tokens", "remaining_tokens", "reset_tokens")
    LIMIT_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    REMAINING_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    RESET_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REMAINING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    RESET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    limit_requests: int
    remaining_requests: int
    reset_requests: _duration_pb2.Duration
    limit_tokens: int
    remaining_tokens: int
    reset_tokens: _duration_pb2.Duration
    def __init__(self, limit_requests: _Optional[int] = ..., remaining_requests: _Optional[int] = ..., reset_requests: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., limit_tokens: _Optional[int] = ..., remaining_tokens: _Optional[int] = ..., reset_tokens: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("job_id", "job_type", "attempt_no", "lock_until", "timeout_ms", "snapshot", "params", "prompt_key", "prompt_version", "model_name", "credential_mode", "credential_id", "output_schema_version", "lease_token", "max_output_tokens", "traceparent", "provider_user_id", "resume_output", "stream_output", "reasoning_effort", "tell_first_token", "model_provider", "model_tier")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_NO_FIELD_NUMBER: _ClassVar[int]
    LOCK_UNTIL_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_KEY_FIELD_NUMBER: _ClassVar[int]
    PROMPT_VERSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_NAME_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_MODE_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_USER_ID_FIELD_NUMBER: _ClassVar[int]
    RESUME_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    STREAM_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    REASONING_EFFORT_FIELD_NUMBER: _ClassVar[int]
    TELL_FIRST_TOKEN_FIELD_NUMBER: _ClassVar[int]
    MODEL_PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_TIER_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_type: str
    attempt_no: int
    lock_until: _timestamp_pb2.Timestamp
    timeout_ms: int
    snapshot: _struct_pb2.Struct
    params: _struct_pb2.Struct
    prompt_key: str
    prompt_version: str
    model_name: str
    credential_mode: str
    credential_id: str
    output_schema_version: str
    lease_token: str
    max_output_tokens: int
    traceparent: str
    provider_user_id: str
    resume_output: str
    stream_output: bool
    reasoning_effort: ReasoningEffort
    tell_first_token: bool
    model_provider: str
    model_tier: str
    def __init__(self, job_id: _Optional[str] = ..., job_type: _Optional[str] = ..., attempt_no: _Optional[int] = ..., lock_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., timeout_ms: _Optional[int] = ..., snapshot: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., prompt_key: _Optional[str] = ..., prompt_version: _Optional[str] = ..., model_name: _Optional[str] = ..., credential_mode: _Optional[str] = ..., credential_id: _Optional[str] = ..., output_schema_version: _Optional[str] = ..., lease_token: _Optional[str] = ..., max_output_tokens: _Optional[int] = ..., traceparent: _Optional[str] = ..., provider_user_id: _Optional[str] = ..., resume_output: _Optional[str] = ..., stream_output: _Optional[bool] = ..., reasoning_effort: _Optional[_Union[ReasoningEffort, str]] = ..., tell_first_token: _Optional[bool] = ..., model_provider: _Optional[str] = ..., model_tier: _Optional[str] = ...) -> None: ...

class OutputChunk(_message.Message):
    __slots__ = ("attempt_no", "offset", "text")
    ATTEMPT_NO_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    attempt_no: int
    offset: int
    text: str
    def __init__(self, attempt_no: _Optional[int] = ..., offset: _Optional[int] = ..., text: _Optional[str] = ...) -> None: ...

class JobEvent(_message.Message):
    __slots__ = ("event_id", "event_type", "job_id", "job_type", "occurred_at", "user_id")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    event_type: str
    job_id: str
    job_type: str
    occurred_at: _timestamp_pb2.Timestamp
    user_id: str
    def __init__(self, event_id: _Optional[str] = ..., event_type: _Optional[str] = ..., job_id: _Optional[str] = ..., job_type: _Optional[str] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., user_id: _Optional[str] = ...) -> None: ...

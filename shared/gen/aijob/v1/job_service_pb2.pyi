import datetime

from shared.gen.aijob.v1 import types_pb2 as _types_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.rpc import status_pb2 as _status_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JoinPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOIN_POLICY_UNSPECIFIED: _ClassVar[JoinPolicy]
    JOIN_POLICY_ALL_SUCCESS: _ClassVar[JoinPolicy]
    JOIN_POLICY_ALL_DONE: _ClassVar[JoinPolicy]
JOIN_POLICY_UNSPECIFIED: JoinPolicy
JOIN_POLICY_ALL_SUCCESS: JoinPolicy
JOIN_POLICY_ALL_DONE: JoinPolicy

class ListJobTypesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListJobTypesResponse(_message.Message):
    __slots__ = ("job_types",)
    JOB_TYPES_FIELD_NUMBER: _ClassVar[int]
    job_types: _containers.RepeatedCompositeFieldContainer[JobType]
    def __init__(self, job_types: _Optional[_Iterable[_Union[JobType, _Mapping]]] = ...) -> None: ...

class JobType(_message.Message):
    __slots__ = ("job_type", "label", "description", "queue_name", "default_priority", "timeout_ms", "max_attempts", "backoff_base_ms", "model_name", "allowed_models", "credential_modes", "max_output_tokens", "snapshot_schema_json", "params_schema_json", "output_schema_json", "reasoning_effort", "allowed_reasoning_efforts")
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    QUEUE_NAME_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_BASE_MS_FIELD_NUMBER: _ClassVar[int]
    MODEL_NAME_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_MODELS_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_MODES_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    PARAMS_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    REASONING_EFFORT_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_REASONING_EFFORTS_FIELD_NUMBER: _ClassVar[int]
    job_type: str
    label: str
    description: str
    queue_name: str
    default_priority: int
    timeout_ms: int
    max_attempts: int
    backoff_base_ms: int
    model_name: str
    allowed_models: _containers.RepeatedScalarFieldContainer[str]
    credential_modes: _containers.RepeatedScalarFieldContainer[str]
    max_output_tokens: int
    snapshot_schema_json: str
    params_schema_json: str
    output_schema_json: str
    reasoning_effort: _types_pb2.ReasoningEffort
    allowed_reasoning_efforts: _containers.RepeatedScalarFieldContainer[_types_pb2.ReasoningEffort]
    def __init__(self, job_type: _Optional[str] = ..., label: _Optional[str] = ..., description: _Optional[str] = ..., queue_name: _Optional[str] = ..., default_priority: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., max_attempts: _Optional[int] = ..., backoff_base_ms: _Optional[int] = ..., model_name: _Optional[str] = ..., allowed_models: _Optional[_Iterable[str]] = ..., credential_modes: _Optional[_Iterable[str]] = ..., max_output_tokens: _Optional[int] = ..., snapshot_schema_json: _Optional[str] = ..., params_schema_json: _Optional[str] = ..., output_schema_json: _Optional[str] = ..., reasoning_effort: _Optional[_Union[_types_pb2.ReasoningEffort, str]] = ..., allowed_reasoning_efforts: _Optional[_Iterable[_Union[_types_pb2.ReasoningEffort, str]]] = ...) -> None: ...

class PutUserCredentialRequest(_message.Message):
    __slots__ = ("provider", "api_key", "label")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    provider: str
    api_key: str
    label: str
    def __init__(self, provider: _Optional[str] = ..., api_key: _Optional[str] = ..., label: _Optional[str] = ...) -> None: ...

class PutUserCredentialResponse(_message.Message):
    __slots__ = ("credential_id", "hint")
    CREDENTIAL_ID_FIELD_NUMBER: _ClassVar[int]
    HINT_FIELD_NUMBER: _ClassVar[int]
    credential_id: str
    hint: str
    def __init__(self, credential_id: _Optional[str] = ..., hint: _Optional[str] = ...) -> None: ...

class ListUserCredentialsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListUserCredentialsResponse(_message.Message):
    __slots__ = ("credentials",)
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    credentials: _containers.RepeatedCompositeFieldContainer[UserCredential]
    def __init__(self, credentials: _Optional[_Iterable[_Union[UserCredential, _Mapping]]] = ...) -> None: ...

class UserCredential(_message.Message):
    __slots__ = ("credential_id", "provider", "hint", "label", "created_at")
    CREDENTIAL_ID_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    HINT_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    credential_id: str
    provider: str
    hint: str
    label: str
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, credential_id: _Optional[str] = ..., provider: _Optional[str] = ..., hint: _Optional[str] = ..., label: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class DeleteUserCredentialRequest(_message.Message):
    __slots__ = ("credential_id",)
    CREDENTIAL_ID_FIELD_NUMBER: _ClassVar[int]
    credential_id: str
    def __init__(self, credential_id: _Optional[str] = ...) -> None: ...

class DeleteUserCredentialResponse(_message.Message):
    __slots__ = ("credential_id",)
    CREDENTIAL_ID_FIELD_NUMBER: _ClassVar[int]
    credential_id: str
    def __init__(self, credential_id: _Optional[str] = ...) -> None: ...

class CreateJobRequest(_message.Message):
    __slots__ = ("job_type", "target_type", "target_id", "snapshot", "params", "idempotency_key", "priority", "credential_mode", "credential_id", "deadline", "model", "snapshot_json", "params_json", "cost_policy", "parent_job_id", "max_parallel", "join_policy", "reasoning_effort")
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    TARGET_TYPE_FIELD_NUMBER: _ClassVar[int]
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_MODE_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_ID_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_JSON_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    COST_POLICY_FIELD_NUMBER: _ClassVar[int]
    PARENT_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    JOIN_POLICY_FIELD_NUMBER: _ClassVar[int]
    REASONING_EFFORT_FIELD_NUMBER: _ClassVar[int]
    job_type: str
    target_type: str
    target_id: str
    snapshot: _struct_pb2.Struct
    params: _struct_pb2.Struct
    idempotency_key: str
    priority: int
    credential_mode: str
    credential_id: str
    deadline: _timestamp_pb2.Timestamp
    model: str
    snapshot_json: str
    params_json: str
    cost_policy: _types_pb2.CostPolicy
    parent_job_id: str
    max_parallel: int
    join_policy: JoinPolicy
    reasoning_effort: _types_pb2.ReasoningEffort
    def __init__(self, job_type: _Optional[str] = ..., target_type: _Optional[str] = ..., target_id: _Optional[str] = ..., snapshot: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., priority: _Optional[int] = ..., credential_mode: _Optional[str] = ..., credential_id: _Optional[str] = ..., deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., model: _Optional[str] = ..., snapshot_json: _Optional[str] = ..., params_json: _Optional[str] = ..., cost_policy: _Optional[_Union[_types_pb2.CostPolicy, str]] = ..., parent_job_id: _Optional[str] = ..., max_parallel: _Optional[int] = ..., join_policy: _Optional[_Union[JoinPolicy, str]] = ..., reasoning_effort: _Optional[_Union[_types_pb2.ReasoningEffort, str]] = ...) -> None: ...

class CreateJobResponse(_message.Message):
    __slots__ = ("job", "created")
    JOB_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    job: _types_pb2.Job
    created: bool
    def __init__(self, job: _Optional[_Union[_types_pb2.Job, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class CreateJobsRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[CreateJobsItem]
    def __init__(self, items: _Optional[_Iterable[_Union[CreateJobsItem, _Mapping]]] = ...) -> None: ...

class CreateJobsItem(_message.Message):
    __slots__ = ("user_id", "job")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    job: CreateJobRequest
    def __init__(self, user_id: _Optional[str] = ..., job: _Optional[_Union[CreateJobRequest, _Mapping]] = ...) -> None: ...

class CreateJobsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CreateJobsResult]
    def __init__(self, results: _Optional[_Iterable[_Union[CreateJobsResult, _Mapping]]] = ...) -> None: ...

class CreateJobsResult(_message.Message):
    __slots__ = ("status", "job", "created")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    status: _status_pb2.Status
    job: _types_pb2.Job
    created: bool
    def __init__(self, status: _Optional[_Union[_status_pb2.Status, _Mapping]] = ..., job: _Optional[_Union[_types_pb2.Job, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class CancelJobResponse(_message.Message):
    __slots__ = ("job", "outcome")
    JOB_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    job: _types_pb2.Job
    outcome: str
    def __init__(self, job: _Optional[_Union[_types_pb2.Job, _Mapping]] = ..., outcome: _Optional[str] = ...) -> None: ...

class StreamOutputRequest(_message.Message):
    __slots__ = ("job_id", "after_offset")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    after_offset: int
    def __init__(self, job_id: _Optional[str] = ..., after_offset: _Optional[int] = ...) -> None: ...

class WatchJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("job_type", "lifecycle_status", "page_size", "page_token", "parent_job_id")
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    LIFECYCLE_STATUS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARENT_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_type: str
    lifecycle_status: str
    page_size: int
    page_token: str
    parent_job_id: str
    def __init__(self, job_type: _Optional[str] = ..., lifecycle_status: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., parent_job_id: _Optional[str] = ...) -> None: ...

class GetJobTreeRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class GetJobTreeResponse(_message.Message):
    __slots__ = ("nodes", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "cost_micros")
    NODES_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[TreeNode]
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    cost_micros: int
    def __init__(self, nodes: _Optional[_Iterable[_Union[TreeNode, _Mapping]]] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., cached_prompt_tokens: _Optional[int] = ..., cost_micros: _Optional[int] = ...) -> None: ...

class TreeNode(_message.Message):
    __slots__ = ("job_id", "parent_job_id", "job_type", "lifecycle_status", "attempt_count", "error_code")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    LIFECYCLE_STATUS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_COUNT_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    parent_job_id: str
    job_type: str
    lifecycle_status: str
    attempt_count: int
    error_code: str
    def __init__(self, job_id: _Optional[str] = ..., parent_job_id: _Optional[str] = ..., job_type: _Optional[str] = ..., lifecycle_status: _Optional[str] = ..., attempt_count: _Optional[int] = ..., error_code: _Optional[str] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs", "next_page_token")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_types_pb2.Job]
    next_page_token: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[_types_pb2.Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SubscribeEventsRequest(_message.Message):
    __slots__ = ("event_types", "after_event_id")
    EVENT_TYPES_FIELD_NUMBER: _ClassVar[int]
    AFTER_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    event_types: _containers.RepeatedScalarFieldContainer[str]
    after_event_id: str
    def __init__(self, event_types: _Optional[_Iterable[str]] = ..., after_event_id: _Optional[str] = ...) -> None: ...

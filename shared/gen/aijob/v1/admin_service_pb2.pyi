import datetime

from shared.gen.aijob.v1 import job_service_pb2 as _job_service_pb2
from shared.gen.aijob.v1 import types_pb2 as _types_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BreakerState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BREAKER_STATE_UNSPECIFIED: _ClassVar[BreakerState]
    BREAKER_STATE_CLOSED: _ClassVar[BreakerState]
    BREAKER_STATE_OPEN: _ClassVar[BreakerState]
    BREAKER_STATE_HALF_OPEN: _ClassVar[BreakerState]
BREAKER_STATE_UNSPECIFIED: BreakerState
BREAKER_STATE_CLOSED: BreakerState
BREAKER_STATE_OPEN: BreakerState
BREAKER_STATE_HALF_OPEN: BreakerState

class ModelTier(_message.Message):
    __slots__ = ("provider", "model")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    provider: str
    model: str
    def __init__(self, provider: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class ModelRoute(_message.Message):
    __slots__ = ("job_type", "tiers")
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    TIERS_FIELD_NUMBER: _ClassVar[int]
    job_type: str
    tiers: _containers.RepeatedCompositeFieldContainer[ModelTier]
    def __init__(self, job_type: _Optional[str] = ..., tiers: _Optional[_Iterable[_Union[ModelTier, _Mapping]]] = ...) -> None: ...

class GetModelRouteRequest(_message.Message):
    __slots__ = ("job_type",)
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    job_type: str
    def __init__(self, job_type: _Optional[str] = ...) -> None: ...

class ResetModelBreakerRequest(_message.Message):
    __slots__ = ("provider", "model", "credential_id")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_ID_FIELD_NUMBER: _ClassVar[int]
    provider: str
    model: str
    credential_id: str
    def __init__(self, provider: _Optional[str] = ..., model: _Optional[str] = ..., credential_id: _Optional[str] = ...) -> None: ...

class ResetModelBreakerResponse(_message.Message):
    __slots__ = ("breaker_state", "was_open")
    BREAKER_STATE_FIELD_NUMBER: _ClassVar[int]
    WAS_OPEN_FIELD_NUMBER: _ClassVar[int]
    breaker_state: BreakerState
    was_open: bool
    def __init__(self, breaker_state: _Optional[_Union[BreakerState, str]] = ..., was_open: _Optional[bool] = ...) -> None: ...

class GetJobTimelineRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class JobTimeline(_message.Message):
    __slots__ = ("events", "attempts", "snapshot_json", "params_json")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_JSON_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[TimelineEvent]
    attempts: _containers.RepeatedCompositeFieldContainer[TimelineAttempt]
    snapshot_json: str
    params_json: str
    def __init__(self, events: _Optional[_Iterable[_Union[TimelineEvent, _Mapping]]] = ..., attempts: _Optional[_Iterable[_Union[TimelineAttempt, _Mapping]]] = ..., snapshot_json: _Optional[str] = ..., params_json: _Optional[str] = ...) -> None: ...

class TimelineEvent(_message.Message):
    __slots__ = ("event_type", "occurred_at", "payload_json")
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    event_type: str
    occurred_at: _timestamp_pb2.Timestamp
    payload_json: str
    def __init__(self, event_type: _Optional[str] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., payload_json: _Optional[str] = ...) -> None: ...

class TimelineAttempt(_message.Message):
    __slots__ = ("attempt_no", "runtime_instance_id", "model", "prompt_tokens", "completion_tokens", "cost_micros", "latency_ms", "error_code", "recorded_at", "cached_prompt_tokens", "reasoning_tokens", "model_tier")
    ATTEMPT_NO_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    CACHED_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MODEL_TIER_FIELD_NUMBER: _ClassVar[int]
    attempt_no: int
    runtime_instance_id: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_micros: int
    latency_ms: int
    error_code: str
    recorded_at: _timestamp_pb2.Timestamp
    cached_prompt_tokens: int
    reasoning_tokens: int
    model_tier: str
    def __init__(self, attempt_no: _Optional[int] = ..., runtime_instance_id: _Optional[str] = ..., model: _Optional[str] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., cost_micros: _Optional[int] = ..., latency_ms: _Optional[int] = ..., error_code: _Optional[str] = ..., recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cached_prompt_tokens: _Optional[int] = ..., reasoning_tokens: _Optional[int] = ..., model_tier: _Optional[str] = ...) -> None: ...

class PutUserBudgetRequest(_message.Message):
    __slots__ = ("user_id", "daily_tokens", "daily_cost_micros")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    DAILY_TOKENS_FIELD_NUMBER: _ClassVar[int]
    DAILY_COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    daily_tokens: int
    daily_cost_micros: int
    def __init__(self, user_id: _Optional[str] = ..., daily_tokens: _Optional[int] = ..., daily_cost_micros: _Optional[int] = ...) -> None: ...

class PutUserBudgetResponse(_message.Message):
    __slots__ = ("user_id", "daily_tokens", "daily_cost_micros")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    DAILY_TOKENS_FIELD_NUMBER: _ClassVar[int]
    DAILY_COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    daily_tokens: int
    daily_cost_micros: int
    def __init__(self, user_id: _Optional[str] = ..., daily_tokens: _Optional[int] = ..., daily_cost_micros: _Optional[int] = ...) -> None: ...

class GetUserUsageRequest(_message.Message):
    __slots__ = ("user_id", "from_date", "to_date")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_DATE_FIELD_NUMBER: _ClassVar[int]
    TO_DATE_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    from_date: str
    to_date: str
    def __init__(self, user_id: _Optional[str] = ..., from_date: _Optional[str] = ..., to_date: _Optional[str] = ...) -> None: ...

class GetUserUsageResponse(_message.Message):
    __slots__ = ("prompt_tokens", "completion_tokens", "cost_micros", "jobs", "attempts", "cached_prompt_tokens", "from_date", "to_date", "model_keys", "daily_tokens_budget", "daily_cost_budget_micros", "tokens_today", "cost_today_micros", "peak_cost_micros", "off_peak_cost_micros", "saved_cost_micros", "reasoning_tokens", "cache_hit_share")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    CACHED_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    FROM_DATE_FIELD_NUMBER: _ClassVar[int]
    TO_DATE_FIELD_NUMBER: _ClassVar[int]
    MODEL_KEYS_FIELD_NUMBER: _ClassVar[int]
    DAILY_TOKENS_BUDGET_FIELD_NUMBER: _ClassVar[int]
    DAILY_COST_BUDGET_MICROS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_TODAY_FIELD_NUMBER: _ClassVar[int]
    COST_TODAY_MICROS_FIELD_NUMBER: _ClassVar[int]
    PEAK_COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    OFF_PEAK_COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    SAVED_COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_HIT_SHARE_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    completion_tokens: int
    cost_micros: int
    jobs: int
    attempts: int
    cached_prompt_tokens: int
    from_date: str
    to_date: str
    model_keys: _containers.RepeatedCompositeFieldContainer[ModelKeyUsage]
    daily_tokens_budget: int
    daily_cost_budget_micros: int
    tokens_today: int
    cost_today_micros: int
    peak_cost_micros: int
    off_peak_cost_micros: int
    saved_cost_micros: int
    reasoning_tokens: int
    cache_hit_share: float
    def __init__(self, prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., cost_micros: _Optional[int] = ..., jobs: _Optional[int] = ..., attempts: _Optional[int] = ..., cached_prompt_tokens: _Optional[int] = ..., from_date: _Optional[str] = ..., to_date: _Optional[str] = ..., model_keys: _Optional[_Iterable[_Union[ModelKeyUsage, _Mapping]]] = ..., daily_tokens_budget: _Optional[int] = ..., daily_cost_budget_micros: _Optional[int] = ..., tokens_today: _Optional[int] = ..., cost_today_micros: _Optional[int] = ..., peak_cost_micros: _Optional[int] = ..., off_peak_cost_micros: _Optional[int] = ..., saved_cost_micros: _Optional[int] = ..., reasoning_tokens: _Optional[int] = ..., cache_hit_share: _Optional[float] = ...) -> None: ...

class ModelKeyUsage(_message.Message):
    __slots__ = ("provider", "model", "credential_scope", "prompt_tokens", "completion_tokens", "cost_micros", "jobs", "attempts", "cached_prompt_tokens")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_SCOPE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    CACHED_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    provider: str
    model: str
    credential_scope: str
    prompt_tokens: int
    completion_tokens: int
    cost_micros: int
    jobs: int
    attempts: int
    cached_prompt_tokens: int
    def __init__(self, provider: _Optional[str] = ..., model: _Optional[str] = ..., credential_scope: _Optional[str] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., cost_micros: _Optional[int] = ..., jobs: _Optional[int] = ..., attempts: _Optional[int] = ..., cached_prompt_tokens: _Optional[int] = ...) -> None: ...

class ReencryptCredentialsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReencryptCredentialsResponse(_message.Message):
    __slots__ = ("reencrypted", "key_version")
    REENCRYPTED_FIELD_NUMBER: _ClassVar[int]
    KEY_VERSION_FIELD_NUMBER: _ClassVar[int]
    reencrypted: int
    key_version: int
    def __init__(self, reencrypted: _Optional[int] = ..., key_version: _Optional[int] = ...) -> None: ...

class ModelLimit(_message.Message):
    __slots__ = ("provider", "model", "credential_scope", "max_concurrency", "requests_per_minute", "tokens_per_minute", "daily_cost_micros", "max_concurrency_per_user", "breaker_state")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_SCOPE_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    DAILY_COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_PER_USER_FIELD_NUMBER: _ClassVar[int]
    BREAKER_STATE_FIELD_NUMBER: _ClassVar[int]
    provider: str
    model: str
    credential_scope: str
    max_concurrency: int
    requests_per_minute: int
    tokens_per_minute: int
    daily_cost_micros: int
    max_concurrency_per_user: int
    breaker_state: BreakerState
    def __init__(self, provider: _Optional[str] = ..., model: _Optional[str] = ..., credential_scope: _Optional[str] = ..., max_concurrency: _Optional[int] = ..., requests_per_minute: _Optional[int] = ..., tokens_per_minute: _Optional[int] = ..., daily_cost_micros: _Optional[int] = ..., max_concurrency_per_user: _Optional[int] = ..., breaker_state: _Optional[_Union[BreakerState, str]] = ...) -> None: ...

class PutModelLimitRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: ModelLimit
    def __init__(self, limit: _Optional[_Union[ModelLimit, _Mapping]] = ...) -> None: ...

class PutModelLimitResponse(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: ModelLimit
    def __init__(self, limit: _Optional[_Union[ModelLimit, _Mapping]] = ...) -> None: ...

class ListModelLimitsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListModelLimitsResponse(_message.Message):
    __slots__ = ("limits",)
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    limits: _containers.RepeatedCompositeFieldContainer[ModelLimit]
    def __init__(self, limits: _Optional[_Iterable[_Union[ModelLimit, _Mapping]]] = ...) -> None: ...

class ModelKeyStats(_message.Message):
    __slots__ = ("limit", "in_flight", "effective_concurrency", "paused_until", "rate_limited_total", "rate_limited_last_minute", "cost_today_micros")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    PAUSED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMITED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMITED_LAST_MINUTE_FIELD_NUMBER: _ClassVar[int]
    COST_TODAY_MICROS_FIELD_NUMBER: _ClassVar[int]
    limit: ModelLimit
    in_flight: int
    effective_concurrency: int
    paused_until: _timestamp_pb2.Timestamp
    rate_limited_total: int
    rate_limited_last_minute: int
    cost_today_micros: int
    def __init__(self, limit: _Optional[_Union[ModelLimit, _Mapping]] = ..., in_flight: _Optional[int] = ..., effective_concurrency: _Optional[int] = ..., paused_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., rate_limited_total: _Optional[int] = ..., rate_limited_last_minute: _Optional[int] = ..., cost_today_micros: _Optional[int] = ...) -> None: ...

class AdminListJobsRequest(_message.Message):
    __slots__ = ("job_type", "lifecycle_status", "queue_name", "user_id", "created_after", "created_before", "page_size", "page_token", "error_code", "parent_job_id")
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    LIFECYCLE_STATUS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    PARENT_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_type: str
    lifecycle_status: str
    queue_name: str
    user_id: str
    created_after: _timestamp_pb2.Timestamp
    created_before: _timestamp_pb2.Timestamp
    page_size: int
    page_token: str
    error_code: str
    parent_job_id: str
    def __init__(self, job_type: _Optional[str] = ..., lifecycle_status: _Optional[str] = ..., queue_name: _Optional[str] = ..., user_id: _Optional[str] = ..., created_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., error_code: _Optional[str] = ..., parent_job_id: _Optional[str] = ...) -> None: ...

class RetryJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class GetQueueStatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QueueStats(_message.Message):
    __slots__ = ("depths", "oldest_queued", "running_count", "dead_outbox_events", "pending_outbox_events", "outbox_lag_seconds", "model_keys", "deferred", "finished_last_hour")
    DEPTHS_FIELD_NUMBER: _ClassVar[int]
    OLDEST_QUEUED_FIELD_NUMBER: _ClassVar[int]
    RUNNING_COUNT_FIELD_NUMBER: _ClassVar[int]
    DEAD_OUTBOX_EVENTS_FIELD_NUMBER: _ClassVar[int]
    PENDING_OUTBOX_EVENTS_FIELD_NUMBER: _ClassVar[int]
    OUTBOX_LAG_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MODEL_KEYS_FIELD_NUMBER: _ClassVar[int]
    DEFERRED_FIELD_NUMBER: _ClassVar[int]
    FINISHED_LAST_HOUR_FIELD_NUMBER: _ClassVar[int]
    depths: _containers.RepeatedCompositeFieldContainer[QueueDepth]
    oldest_queued: _containers.RepeatedCompositeFieldContainer[QueueAge]
    running_count: int
    dead_outbox_events: int
    pending_outbox_events: int
    outbox_lag_seconds: float
    model_keys: _containers.RepeatedCompositeFieldContainer[ModelKeyStats]
    deferred: _containers.RepeatedCompositeFieldContainer[QueueDeferred]
    finished_last_hour: _containers.RepeatedCompositeFieldContainer[QueueDepth]
    def __init__(self, depths: _Optional[_Iterable[_Union[QueueDepth, _Mapping]]] = ..., oldest_queued: _Optional[_Iterable[_Union[QueueAge, _Mapping]]] = ..., running_count: _Optional[int] = ..., dead_outbox_events: _Optional[int] = ..., pending_outbox_events: _Optional[int] = ..., outbox_lag_seconds: _Optional[float] = ..., model_keys: _Optional[_Iterable[_Union[ModelKeyStats, _Mapping]]] = ..., deferred: _Optional[_Iterable[_Union[QueueDeferred, _Mapping]]] = ..., finished_last_hour: _Optional[_Iterable[_Union[QueueDepth, _Mapping]]] = ...) -> None: ...

class QueueDeferred(_message.Message):
    __slots__ = ("queue_name", "count")
    QUEUE_NAME_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    queue_name: str
    count: int
    def __init__(self, queue_name: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class QueueDepth(_message.Message):
    __slots__ = ("queue_name", "job_type", "lifecycle_status", "count")
    QUEUE_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    LIFECYCLE_STATUS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    queue_name: str
    job_type: str
    lifecycle_status: str
    count: int
    def __init__(self, queue_name: _Optional[str] = ..., job_type: _Optional[str] = ..., lifecycle_status: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class QueueAge(_message.Message):
    __slots__ = ("queue_name", "age_seconds")
    QUEUE_NAME_FIELD_NUMBER: _ClassVar[int]
    AGE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    queue_name: str
    age_seconds: float
    def __init__(self, queue_name: _Optional[str] = ..., age_seconds: _Optional[float] = ...) -> None: ...

class CancelUserJobsRequest(_message.Message):
    __slots__ = ("user_id",)
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ...) -> None: ...

class CancelUserJobsResponse(_message.Message):
    __slots__ = ("cancelled", "cancel_requested")
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    cancelled: int
    cancel_requested: int
    def __init__(self, cancelled: _Optional[int] = ..., cancel_requested: _Optional[int] = ...) -> None: ...

class RedriveDeadEventsRequest(_message.Message):
    __slots__ = ("event_ids",)
    EVENT_IDS_FIELD_NUMBER: _ClassVar[int]
    event_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, event_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class RedriveDeadEventsResponse(_message.Message):
    __slots__ = ("redriven",)
    REDRIVEN_FIELD_NUMBER: _ClassVar[int]
    redriven: int
    def __init__(self, redriven: _Optional[int] = ...) -> None: ...

class AdoptLegacyJobsRequest(_message.Message):
    __slots__ = ("job_type", "dry_run")
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    job_type: str
    dry_run: bool
    def __init__(self, job_type: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class AdoptLegacyJobsResponse(_message.Message):
    __slots__ = ("adopted", "left_to_legacy")
    ADOPTED_FIELD_NUMBER: _ClassVar[int]
    LEFT_TO_LEGACY_FIELD_NUMBER: _ClassVar[int]
    adopted: int
    left_to_legacy: int
    def __init__(self, adopted: _Optional[int] = ..., left_to_legacy: _Optional[int] = ...) -> None: ...

class ListAuditEntriesRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListAuditEntriesResponse(_message.Message):
    __slots__ = ("entries", "next_page_token")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[AuditEntry]
    next_page_token: str
    def __init__(self, entries: _Optional[_Iterable[_Union[AuditEntry, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class AuditEntry(_message.Message):
    __slots__ = ("entry_id", "occurred_at", "actor", "role", "action", "target_json", "outcome", "detail")
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TARGET_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    entry_id: str
    occurred_at: _timestamp_pb2.Timestamp
    actor: str
    role: str
    action: str
    target_json: str
    outcome: str
    detail: str
    def __init__(self, entry_id: _Optional[str] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., actor: _Optional[str] = ..., role: _Optional[str] = ..., action: _Optional[str] = ..., target_json: _Optional[str] = ..., outcome: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

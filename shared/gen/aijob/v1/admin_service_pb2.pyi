import datetime

from shared.gen.aijob.v1 import job_service_pb2 as _job_service_pb2
from shared.gen.aijob.v1 import types_pb2 as _types_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AdminListJobsRequest(_message.Message):
    __slots__ = ("job_type", "lifecycle_status", "queue_name", "user_id", "created_after", "created_before", "page_size", "page_token")
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    LIFECYCLE_STATUS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_type: str
    lifecycle_status: str
    queue_name: str
    user_id: str
    created_after: _timestamp_pb2.Timestamp
    created_before: _timestamp_pb2.Timestamp
    page_size: int
    page_token: str
    def __init__(self, job_type: _Optional[str] = ..., lifecycle_status: _Optional[str] = ..., queue_name: _Optional[str] = ..., user_id: _Optional[str] = ..., created_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class RetryJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class GetQueueStatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QueueStats(_message.Message):
    __slots__ = ("depths", "oldest_queued", "running_count", "dead_outbox_events", "pending_outbox_events", "outbox_lag_seconds")
    DEPTHS_FIELD_NUMBER: _ClassVar[int]
    OLDEST_QUEUED_FIELD_NUMBER: _ClassVar[int]
    RUNNING_COUNT_FIELD_NUMBER: _ClassVar[int]
    DEAD_OUTBOX_EVENTS_FIELD_NUMBER: _ClassVar[int]
    PENDING_OUTBOX_EVENTS_FIELD_NUMBER: _ClassVar[int]
    OUTBOX_LAG_SECONDS_FIELD_NUMBER: _ClassVar[int]
    depths: _containers.RepeatedCompositeFieldContainer[QueueDepth]
    oldest_queued: _containers.RepeatedCompositeFieldContainer[QueueAge]
    running_count: int
    dead_outbox_events: int
    pending_outbox_events: int
    outbox_lag_seconds: float
    def __init__(self, depths: _Optional[_Iterable[_Union[QueueDepth, _Mapping]]] = ..., oldest_queued: _Optional[_Iterable[_Union[QueueAge, _Mapping]]] = ..., running_count: _Optional[int] = ..., dead_outbox_events: _Optional[int] = ..., pending_outbox_events: _Optional[int] = ..., outbox_lag_seconds: _Optional[float] = ...) -> None: ...

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

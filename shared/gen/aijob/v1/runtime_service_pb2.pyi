import datetime

from shared.gen.aijob.v1 import types_pb2 as _types_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.rpc import status_pb2 as _status_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PollRequest(_message.Message):
    __slots__ = ("subscribe", "credit", "report", "keepalive", "report_batch")
    SUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    CREDIT_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    KEEPALIVE_FIELD_NUMBER: _ClassVar[int]
    REPORT_BATCH_FIELD_NUMBER: _ClassVar[int]
    subscribe: PollSubscribe
    credit: PollCredit
    report: PollReport
    keepalive: PollKeepalive
    report_batch: ReportBatch
    def __init__(self, subscribe: _Optional[_Union[PollSubscribe, _Mapping]] = ..., credit: _Optional[_Union[PollCredit, _Mapping]] = ..., report: _Optional[_Union[PollReport, _Mapping]] = ..., keepalive: _Optional[_Union[PollKeepalive, _Mapping]] = ..., report_batch: _Optional[_Union[ReportBatch, _Mapping]] = ...) -> None: ...

class ReportBatch(_message.Message):
    __slots__ = ("reports",)
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    reports: _containers.RepeatedCompositeFieldContainer[PollReport]
    def __init__(self, reports: _Optional[_Iterable[_Union[PollReport, _Mapping]]] = ...) -> None: ...

class PollReport(_message.Message):
    __slots__ = ("report_id", "result", "failure", "heartbeat", "output_chunk")
    REPORT_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_CHUNK_FIELD_NUMBER: _ClassVar[int]
    report_id: int
    result: SubmitResultRequest
    failure: SubmitFailureRequest
    heartbeat: HeartbeatRequest
    output_chunk: OutputChunkReport
    def __init__(self, report_id: _Optional[int] = ..., result: _Optional[_Union[SubmitResultRequest, _Mapping]] = ..., failure: _Optional[_Union[SubmitFailureRequest, _Mapping]] = ..., heartbeat: _Optional[_Union[HeartbeatRequest, _Mapping]] = ..., output_chunk: _Optional[_Union[OutputChunkReport, _Mapping]] = ...) -> None: ...

class OutputChunkReport(_message.Message):
    __slots__ = ("job_id", "runtime_instance_id", "lease_token", "chunk")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    runtime_instance_id: str
    lease_token: str
    chunk: _types_pb2.OutputChunk
    def __init__(self, job_id: _Optional[str] = ..., runtime_instance_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., chunk: _Optional[_Union[_types_pb2.OutputChunk, _Mapping]] = ...) -> None: ...

class PollKeepalive(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LeaseRef(_message.Message):
    __slots__ = ("job_id", "attempt_no")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_NO_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    attempt_no: int
    def __init__(self, job_id: _Optional[str] = ..., attempt_no: _Optional[int] = ...) -> None: ...

class PollSubscribe(_message.Message):
    __slots__ = ("runtime_instance_id", "job_types", "slots", "held", "batch_frames")
    RUNTIME_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPES_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    BATCH_FRAMES_FIELD_NUMBER: _ClassVar[int]
    runtime_instance_id: str
    job_types: _containers.RepeatedScalarFieldContainer[str]
    slots: int
    held: _containers.RepeatedCompositeFieldContainer[LeaseRef]
    batch_frames: bool
    def __init__(self, runtime_instance_id: _Optional[str] = ..., job_types: _Optional[_Iterable[str]] = ..., slots: _Optional[int] = ..., held: _Optional[_Iterable[_Union[LeaseRef, _Mapping]]] = ..., batch_frames: _Optional[bool] = ...) -> None: ...

class PollCredit(_message.Message):
    __slots__ = ("slots",)
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    slots: int
    def __init__(self, slots: _Optional[int] = ...) -> None: ...

class PollResponse(_message.Message):
    __slots__ = ("lease", "cancel", "ack", "lease_batch", "ack_batch")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    LEASE_BATCH_FIELD_NUMBER: _ClassVar[int]
    ACK_BATCH_FIELD_NUMBER: _ClassVar[int]
    lease: _types_pb2.Lease
    cancel: CancelNotice
    ack: ReportAck
    lease_batch: LeaseBatch
    ack_batch: AckBatch
    def __init__(self, lease: _Optional[_Union[_types_pb2.Lease, _Mapping]] = ..., cancel: _Optional[_Union[CancelNotice, _Mapping]] = ..., ack: _Optional[_Union[ReportAck, _Mapping]] = ..., lease_batch: _Optional[_Union[LeaseBatch, _Mapping]] = ..., ack_batch: _Optional[_Union[AckBatch, _Mapping]] = ...) -> None: ...

class LeaseBatch(_message.Message):
    __slots__ = ("leases",)
    LEASES_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[_types_pb2.Lease]
    def __init__(self, leases: _Optional[_Iterable[_Union[_types_pb2.Lease, _Mapping]]] = ...) -> None: ...

class AckBatch(_message.Message):
    __slots__ = ("acks",)
    ACKS_FIELD_NUMBER: _ClassVar[int]
    acks: _containers.RepeatedCompositeFieldContainer[ReportAck]
    def __init__(self, acks: _Optional[_Iterable[_Union[ReportAck, _Mapping]]] = ...) -> None: ...

class ReportAck(_message.Message):
    __slots__ = ("report_id", "status", "result", "failure", "heartbeat")
    REPORT_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    report_id: int
    status: _status_pb2.Status
    result: SubmitResultResponse
    failure: SubmitFailureResponse
    heartbeat: HeartbeatResponse
    def __init__(self, report_id: _Optional[int] = ..., status: _Optional[_Union[_status_pb2.Status, _Mapping]] = ..., result: _Optional[_Union[SubmitResultResponse, _Mapping]] = ..., failure: _Optional[_Union[SubmitFailureResponse, _Mapping]] = ..., heartbeat: _Optional[_Union[HeartbeatResponse, _Mapping]] = ...) -> None: ...

class CancelNotice(_message.Message):
    __slots__ = ("job_id", "attempt_no")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_NO_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    attempt_no: int
    def __init__(self, job_id: _Optional[str] = ..., attempt_no: _Optional[int] = ...) -> None: ...

class LockRequest(_message.Message):
    __slots__ = ("job_id", "runtime_instance_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    runtime_instance_id: str
    def __init__(self, job_id: _Optional[str] = ..., runtime_instance_id: _Optional[str] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("job_id", "attempt_no", "runtime_instance_id", "progress", "lease_token", "first_token")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_NO_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FIRST_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    attempt_no: int
    runtime_instance_id: str
    progress: int
    lease_token: str
    first_token: bool
    def __init__(self, job_id: _Optional[str] = ..., attempt_no: _Optional[int] = ..., runtime_instance_id: _Optional[str] = ..., progress: _Optional[int] = ..., lease_token: _Optional[str] = ..., first_token: _Optional[bool] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("lock_until", "cancel_requested")
    LOCK_UNTIL_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    lock_until: _timestamp_pb2.Timestamp
    cancel_requested: bool
    def __init__(self, lock_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_requested: _Optional[bool] = ...) -> None: ...

class SubmitResultRequest(_message.Message):
    __slots__ = ("job_id", "attempt_no", "runtime_instance_id", "output_hash", "output_json", "usage", "lease_token")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_NO_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_HASH_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    attempt_no: int
    runtime_instance_id: str
    output_hash: str
    output_json: str
    usage: _types_pb2.Usage
    lease_token: str
    def __init__(self, job_id: _Optional[str] = ..., attempt_no: _Optional[int] = ..., runtime_instance_id: _Optional[str] = ..., output_hash: _Optional[str] = ..., output_json: _Optional[str] = ..., usage: _Optional[_Union[_types_pb2.Usage, _Mapping]] = ..., lease_token: _Optional[str] = ...) -> None: ...

class SubmitResultResponse(_message.Message):
    __slots__ = ("result_idempotency_key", "duplicate")
    RESULT_IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    result_idempotency_key: str
    duplicate: bool
    def __init__(self, result_idempotency_key: _Optional[str] = ..., duplicate: _Optional[bool] = ...) -> None: ...

class SubmitFailureRequest(_message.Message):
    __slots__ = ("job_id", "attempt_no", "runtime_instance_id", "error_code", "retryable", "public_error_message", "internal_error_message", "retry_after", "usage", "lease_token")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_NO_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    INTERNAL_ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    attempt_no: int
    runtime_instance_id: str
    error_code: str
    retryable: bool
    public_error_message: str
    internal_error_message: str
    retry_after: _duration_pb2.Duration
    usage: _types_pb2.Usage
    lease_token: str
    def __init__(self, job_id: _Optional[str] = ..., attempt_no: _Optional[int] = ..., runtime_instance_id: _Optional[str] = ..., error_code: _Optional[str] = ..., retryable: _Optional[bool] = ..., public_error_message: _Optional[str] = ..., internal_error_message: _Optional[str] = ..., retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., usage: _Optional[_Union[_types_pb2.Usage, _Mapping]] = ..., lease_token: _Optional[str] = ...) -> None: ...

class SubmitFailureResponse(_message.Message):
    __slots__ = ("lifecycle_status", "next_attempt_at")
    LIFECYCLE_STATUS_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_AT_FIELD_NUMBER: _ClassVar[int]
    lifecycle_status: str
    next_attempt_at: _timestamp_pb2.Timestamp
    def __init__(self, lifecycle_status: _Optional[str] = ..., next_attempt_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ResolveCredentialRequest(_message.Message):
    __slots__ = ("job_id", "attempt_no", "runtime_instance_id", "lease_token")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_NO_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    attempt_no: int
    runtime_instance_id: str
    lease_token: str
    def __init__(self, job_id: _Optional[str] = ..., attempt_no: _Optional[int] = ..., runtime_instance_id: _Optional[str] = ..., lease_token: _Optional[str] = ...) -> None: ...

class ResolveCredentialResponse(_message.Message):
    __slots__ = ("api_key", "provider")
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    api_key: str
    provider: str
    def __init__(self, api_key: _Optional[str] = ..., provider: _Optional[str] = ...) -> None: ...

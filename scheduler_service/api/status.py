"""The one mapping from scheduler errors to gRPC status codes, and the wrappers that apply it.

The public error code travels as ``google.rpc.ErrorInfo`` (reason = code, domain ``aijob.v1``) in
the rich status details. An unexpected exception is logged with an id and answered INTERNAL with
that id only: no stack trace, SQL or path reaches a caller.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from scheduler_service import metrics
from scheduler_service.credentials import CredentialUnavailableError
from scheduler_service.errors import (
    DatabaseUnavailableError,
    InvalidRequestError,
    JobNotFoundError,
    LifecycleError,
    LimitExceededError,
    NotLeaseHolderError,
    ResultAlreadyExistsError,
    SchedulerError,
)
from scheduler_service.jobs.service import IdempotencyKeyReusedError, JobNotRetryableError
from scheduler_service.registry.registry import UnknownJobTypeError
from shared.error_codes import ERROR_DOMAIN, ErrorCode

__all__ = ["abort_with", "grpc_errors", "grpc_stream_errors", "status_code_of"]

log = logging.getLogger(__name__)

StatusCode = grpc.StatusCode
Context = grpc.aio.ServicerContext[Any, Any]
R = TypeVar("R")

#: Most specific class first; the first match by isinstance wins.
_STATUS: tuple[tuple[type[SchedulerError], StatusCode], ...] = (
    (JobNotFoundError, StatusCode.NOT_FOUND),
    (InvalidRequestError, StatusCode.INVALID_ARGUMENT),
    (UnknownJobTypeError, StatusCode.INVALID_ARGUMENT),
    (ResultAlreadyExistsError, StatusCode.ALREADY_EXISTS),
    (IdempotencyKeyReusedError, StatusCode.ALREADY_EXISTS),
    (LifecycleError, StatusCode.FAILED_PRECONDITION),
    (LimitExceededError, StatusCode.RESOURCE_EXHAUSTED),
    (NotLeaseHolderError, StatusCode.PERMISSION_DENIED),
    (JobNotRetryableError, StatusCode.FAILED_PRECONDITION),
    (CredentialUnavailableError, StatusCode.FAILED_PRECONDITION),
    (DatabaseUnavailableError, StatusCode.UNAVAILABLE),
)


def status_code_of(exc: SchedulerError) -> StatusCode:
    for cls, code in _STATUS:
        if isinstance(exc, cls):
            return code
    return StatusCode.INTERNAL


async def abort_with(
    context: Context, code: StatusCode, reason: ErrorCode, message: str, **metadata: str
) -> NoReturn:
    info = error_details_pb2.ErrorInfo(reason=reason.value, domain=ERROR_DOMAIN, metadata=metadata)
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=code.value[0], message=message, details=[detail])
    await context.abort(
        code, message, trailing_metadata=(("grpc-status-details-bin", status.SerializeToString()),)
    )


async def _abort_for(context: Context, exc: Exception, method: str) -> NoReturn:
    if isinstance(exc, SchedulerError):
        metadata = (
            {"field": exc.field} if isinstance(exc, InvalidRequestError) and exc.field else {}
        )
        await abort_with(context, status_code_of(exc), exc.code, exc.message, **metadata)
    error_id = uuid.uuid4().hex[:12]
    log.error(
        "unexpected error",
        exc_info=exc,
        extra={"action": "rpc_error", "method": method, "errorId": error_id},
    )
    await abort_with(context, StatusCode.INTERNAL, ErrorCode.INTERNAL, f"internal error {error_id}")


def grpc_errors(
    method: Callable[..., Awaitable[R]],
) -> Callable[..., Awaitable[R]]:
    """Wrap a unary servicer method so every failure leaves as a precise status."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: Context) -> R:
        started, code = time.perf_counter(), "OK"
        try:
            return await method(self, request, context)
        except grpc.aio.AbortError:
            code = "ABORTED_BY_HANDLER"
            raise
        except Exception as exc:
            code = _code_name(exc)
            await _abort_for(context, exc, method.__name__)
        finally:
            _observe(method.__name__, code, started)

    return wrapper


def grpc_stream_errors(
    method: Callable[..., AsyncIterator[R]],
) -> Callable[..., AsyncIterator[R]]:
    """The same for server-streaming servicer methods."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: Context) -> AsyncIterator[R]:
        started, code = time.perf_counter(), "OK"
        try:
            async for item in method(self, request, context):
                yield item
        except grpc.aio.AbortError:
            code = "ABORTED_BY_HANDLER"
            raise
        except Exception as exc:
            code = _code_name(exc)
            await _abort_for(context, exc, method.__name__)
        finally:
            _observe(method.__name__, code, started)

    return wrapper


def _code_name(exc: Exception) -> str:
    return status_code_of(exc).name if isinstance(exc, SchedulerError) else "INTERNAL"


def _observe(method: str, code: str, started: float) -> None:
    metrics.RPCS.labels(method, code).inc()
    metrics.RPC_LATENCY.labels(method).observe(time.perf_counter() - started)

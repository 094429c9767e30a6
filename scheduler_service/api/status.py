"""Status mapping and RPC metrics for every RPC, in one server interceptor.

A :class:`~scheduler_service.core.errors.SchedulerError` leaves as the gRPC status its class names,
with the public error code as ``google.rpc.ErrorInfo`` (reason = code, domain ``aijob.v1``) in the
rich status details. An unexpected exception is logged with an id and answered INTERNAL with that
id only: no stack trace, SQL or path reaches a caller. Every call, unary or streaming, Poll and
refused calls included, is counted in ``aijob_rpc_total`` by method and code.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, NoReturn

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from scheduler_service.api.handlers import Continuation, Handler, ServerInterceptor, rebuild
from scheduler_service.core.errors import InvalidRequestError, SchedulerError
from scheduler_service.core.log_throttle import LogThrottle
from scheduler_service.services import metrics
from shared.error_codes import ERROR_DOMAIN, ErrorCode

__all__ = [
    "Continuation",
    "Handler",
    "ServerInterceptor",
    "StatusInterceptor",
    "abort_with",
    "rich_status",
    "status_code_of",
    "status_of",
]

log = logging.getLogger(__name__)


_UNEXPECTED = LogThrottle()

StatusCode = grpc.StatusCode
Context = grpc.aio.ServicerContext[Any, Any]


def status_code_of(exc: SchedulerError) -> StatusCode:
    code: StatusCode = getattr(StatusCode, exc.status)
    return code


def rich_status(
    code: StatusCode, reason: ErrorCode, message: str, **metadata: str
) -> status_pb2.Status:
    """The ``google.rpc.Status`` of an answer: code, message and the catalogue's ErrorInfo."""
    info = error_details_pb2.ErrorInfo(reason=reason.value, domain=ERROR_DOMAIN, metadata=metadata)
    detail = any_pb2.Any()
    detail.Pack(info)
    return status_pb2.Status(code=code.value[0], message=message, details=[detail])


def status_of(exc: BaseException, method: str) -> tuple[StatusCode, status_pb2.Status]:
    """What a call that raised ``exc`` answers: a scheduler error's own status, anything else
    INTERNAL with an error id (logged with the stack, never sent)."""
    if isinstance(exc, SchedulerError):
        field = exc.field if isinstance(exc, InvalidRequestError) and exc.field else ""
        metadata = {"field": field} if field else {}
        code = status_code_of(exc)
        return code, rich_status(code, exc.code, exc.message, **metadata)
    error_id = uuid.uuid4().hex[:12]
    also = _UNEXPECTED.admit((method, type(exc).__name__))
    if also is not None:
        # One line (with its stack) per method and error type per interval: one bad request
        # repeated in a loop once wrote a traceback per call, 3.2 MB in 5 s.
        log.error(
            "unexpected error",
            exc_info=exc,
            extra={
                "action": "rpc_error",
                "method": method,
                "errorId": error_id,
                "alsoFailed": also,
            },
        )
    return StatusCode.INTERNAL, rich_status(
        StatusCode.INTERNAL, ErrorCode.INTERNAL, f"internal error {error_id}"
    )


async def abort_with(
    context: Context, code: StatusCode, reason: ErrorCode, message: str, **metadata: str
) -> NoReturn:
    await _abort(context, code, rich_status(code, reason, message, **metadata))


async def _abort(context: Context, code: StatusCode, status: status_pb2.Status) -> NoReturn:
    await context.abort(
        code,
        status.message,
        trailing_metadata=(("grpc-status-details-bin", status.SerializeToString()),),
    )


class _Call:
    """One call's bookkeeping: its outcome becomes the metric's code."""

    def __init__(self, method: str) -> None:
        self.method = method
        self.code = "OK"
        self.started = time.perf_counter()

    async def fail(self, context: Context, exc: BaseException) -> NoReturn:
        if isinstance(exc, grpc.aio.AbortError):
            self.code = _aborted_code(context)
            raise exc
        code, status = status_of(exc, self.method)
        self.code = code.name
        await _abort(context, code, status)

    def done(self) -> None:
        metrics.RPCS.labels(self.method, self.code).inc()
        metrics.RPC_LATENCY.labels(self.method).observe(time.perf_counter() - self.started)


def _aborted_code(context: Context) -> str:
    code = context.code()
    if isinstance(code, StatusCode):
        return code.name
    if isinstance(code, int):
        return next((c.name for c in StatusCode if c.value[0] == code), "UNKNOWN")
    return "ABORTED_BY_HANDLER"


class StatusInterceptor(ServerInterceptor):
    """Wraps every handler so that its failures leave as precise statuses and are counted."""

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler  # type: ignore[return-value]
        method: str = handler_call_details.method
        # Health and reflection (the only services open without a token) take tiny requests:
        # a larger one is refused before it is parsed, whatever the server's message limit.
        anonymous = method.startswith("/grpc.")
        limit = ANONYMOUS_MAX_MESSAGE_BYTES if anonymous else None
        return _wrapped(handler, method.rsplit("/", 1)[-1], max_bytes=limit)


class _Undecodable:
    """What a request that does not parse as its method's message becomes (grpc would answer it
    with an internal error naming Python internals)."""


UNDECODABLE = _Undecodable()


class _Oversized:
    """What an anonymous request over :data:`ANONYMOUS_MAX_MESSAGE_BYTES` becomes, unparsed."""


OVERSIZED = _Oversized()
#: The largest request health or reflection takes (theirs are a few dozen bytes).
ANONYMOUS_MAX_MESSAGE_BYTES = 16 * 1024


def _tolerant(
    deserializer: Callable[[bytes], Any] | None, max_bytes: int | None = None
) -> Callable[[bytes], Any] | None:
    if deserializer is None:
        return None

    def parse(data: bytes) -> Any:
        if max_bytes is not None and len(data) > max_bytes:
            return OVERSIZED
        try:
            return deserializer(data)
        except Exception:
            return UNDECODABLE

    return parse


def _checked(request: Any) -> Any:
    """``request`` (or a stream of them) that raises INVALID_ARGUMENT where one did not parse."""
    _refuse_unparsed(request)
    if isinstance(request, AsyncIterator):

        async def each() -> AsyncIterator[Any]:
            async for item in request:
                _refuse_unparsed(item)
                yield item

        return each()
    return request


def _refuse_unparsed(request: Any) -> None:
    if request is UNDECODABLE:
        raise InvalidRequestError("the request is not a valid message of this method")
    if request is OVERSIZED:
        raise InvalidRequestError(
            f"requests without a token are at most {ANONYMOUS_MAX_MESSAGE_BYTES} bytes"
        )


def _wrapped(handler: Handler, method: str, *, max_bytes: int | None = None) -> Handler:
    return rebuild(
        handler,
        scope=functools.partial(_answered, method),
        prepare=_checked,
        request_deserializer=_tolerant(handler.request_deserializer, max_bytes),
    )


@contextlib.asynccontextmanager
async def _answered(method: str, context: Context) -> AsyncIterator[None]:
    """The call's failure leaves as its precise status; the call is counted either way."""
    call = _Call(method)
    try:
        yield
    except Exception as exc:
        await call.fail(context, exc)
    finally:
        call.done()

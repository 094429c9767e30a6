"""Rebuilding a gRPC method handler around new behaviour, keeping its shape.

Every interceptor here (status mapping, authentication, identity binding, capacity) wraps the
behaviour of the handler it was given; grpc has one constructor per shape (unary or streaming
request and response), and this module is the one place that picks it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import grpc

__all__ = [
    "Behaviour",
    "Continuation",
    "Handler",
    "ServerInterceptor",
    "StreamBehaviour",
    "behaviour_of",
    "rebuild",
]

if TYPE_CHECKING:  # the stubs are generic, the runtime classes are not
    Handler: TypeAlias = grpc.RpcMethodHandler[Any, Any]
    ServerInterceptor: TypeAlias = grpc.aio.ServerInterceptor[Any, Any]
else:
    Handler = grpc.RpcMethodHandler
    ServerInterceptor = grpc.aio.ServerInterceptor
Continuation: TypeAlias = "Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]]"

#: A unary-response behaviour: (request or request iterator, context) -> response.
Behaviour = Callable[[Any, Any], Awaitable[Any]]
#: A streaming-response behaviour: (request or request iterator, context) -> responses.
StreamBehaviour = Callable[[Any, Any], AsyncIterator[Any]]


def behaviour_of(handler: Handler) -> Callable[..., Any]:
    if handler.request_streaming:
        return handler.stream_stream if handler.response_streaming else handler.stream_unary  # type: ignore[return-value]
    return handler.unary_stream if handler.response_streaming else handler.unary_unary  # type: ignore[return-value]


def rebuild(
    handler: Handler,
    *,
    unary: Callable[[Behaviour], Behaviour] | None = None,
    streaming: Callable[[StreamBehaviour], StreamBehaviour] | None = None,
    request_deserializer: Callable[[bytes], Any] | None = None,
) -> Handler:
    """``handler`` with its behaviour passed through ``unary`` (unary responses) or
    ``streaming`` (streamed responses); a missing one leaves that shape's behaviour as it is."""
    original = behaviour_of(handler)
    kwargs: dict[str, Any] = {
        "request_deserializer": request_deserializer or handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.response_streaming:
        behaviour = streaming(original) if streaming else original
        if handler.request_streaming:
            return grpc.stream_stream_rpc_method_handler(behaviour, **kwargs)
        return grpc.unary_stream_rpc_method_handler(behaviour, **kwargs)
    behaviour = unary(original) if unary else original
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(behaviour, **kwargs)
    return grpc.unary_unary_rpc_method_handler(behaviour, **kwargs)

"""Rebuilding a gRPC method handler around a scope, keeping its shape and its style.

Every interceptor here (status mapping, authentication, identity binding, capacity) runs the
handler it was given inside a scope of its own; grpc has one constructor per shape (unary or
streaming request and response), and a streaming behaviour is either an async generator or a
coroutine that writes with ``context.write`` (grpc's own health service is the latter). This module
is the one place that picks the constructor and keeps the style.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, TypeAlias

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

__all__ = [
    "Continuation",
    "Handler",
    "Scope",
    "ServerInterceptor",
    "message_json",
    "rebuild",
]

if TYPE_CHECKING:  # the stubs are generic, the runtime classes are not
    Handler: TypeAlias = grpc.RpcMethodHandler[Any, Any]
    ServerInterceptor: TypeAlias = grpc.aio.ServerInterceptor[Any, Any]
else:
    Handler = grpc.RpcMethodHandler
    ServerInterceptor = grpc.aio.ServerInterceptor
Continuation: TypeAlias = "Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]]"
#: What runs around one call: entered before the behaviour, left when it ends (a stream: when it
#: is over); it sees the call's context and any exception the behaviour raised.
Scope = Callable[[Any], AbstractAsyncContextManager[None]]


def message_json(message: Any) -> str:
    """A request or response as one line of JSON (``{}`` for anything that is not a message)."""
    if isinstance(message, Message):
        return json_format.MessageToJson(message, indent=None, sort_keys=True)
    return "{}"


def _behaviour_of(handler: Handler) -> Callable[..., Any]:
    if handler.request_streaming:
        if handler.response_streaming:
            return handler.stream_stream  # type: ignore[return-value]
        return handler.stream_unary  # type: ignore[return-value]
    if handler.response_streaming:
        return handler.unary_stream  # type: ignore[return-value]
    return handler.unary_unary  # type: ignore[return-value]


def _scoped(
    behaviour: Callable[..., Any], scope: Scope, prepare: Callable[[Any], Any], streaming: bool
) -> Callable[..., Any]:
    if streaming and inspect.isasyncgenfunction(behaviour):

        async def generator(request: Any, context: Any) -> AsyncIterator[Any]:
            async with scope(context):
                async for response in behaviour(prepare(request), context):
                    yield response

        return generator

    async def coroutine(request: Any, context: Any) -> Any:
        async with scope(context):
            return await behaviour(prepare(request), context)

    return coroutine


def rebuild(
    handler: Handler,
    *,
    scope: Scope | None = None,
    prepare: Callable[[Any], Any] = lambda request: request,
    replace_with: Callable[[Any, Any], Awaitable[Any]] | None = None,
    request_deserializer: Callable[[bytes], Any] | None = None,
) -> Handler:
    """``handler`` run inside ``scope`` with its request passed through ``prepare`` — or, with
    ``replace_with``, a handler of the same shape that runs only that coroutine."""
    behaviour = _behaviour_of(handler) if replace_with is None else replace_with
    if scope is not None:
        behaviour = _scoped(behaviour, scope, prepare, handler.response_streaming)
    kwargs: dict[str, Any] = {
        "request_deserializer": request_deserializer or handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.response_streaming:
        if handler.request_streaming:
            return grpc.stream_stream_rpc_method_handler(behaviour, **kwargs)
        return grpc.unary_stream_rpc_method_handler(behaviour, **kwargs)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(behaviour, **kwargs)
    return grpc.unary_unary_rpc_method_handler(behaviour, **kwargs)

"""Anonymous requests read a few at a time, so callers without a token cannot make the server
hold many large messages at once.

gRPC receives a unary request whole before any handler runs, up to the server's message limit
(4 MiB), and a stream's next message once it is asked for. Health and reflection need no token,
so their requests are taken as streams here and each read waits for one of a few permits: a
request not yet read costs the server no more than its HTTP/2 window. A caller that waits longer
than :data:`PERMIT_WAIT_S` for a permit, or takes longer than :data:`READ_S` to send its
message, is answered RESOURCE_EXHAUSTED or DEADLINE_EXCEEDED. With ``permits`` reads of at most
4 MiB each, anonymous requests hold at most ``permits`` x 4 MiB in the server at once, however
many senders there are (docs/security.md states the measured bound)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from scheduler_service.api.handlers import Handler
from scheduler_service.core.errors import LimitExceededError
from shared.error_codes import ErrorCode

__all__ = ["PERMIT_WAIT_S", "READ_S", "AnonymousReads"]

#: How long an anonymous request waits for a permit to be read.
PERMIT_WAIT_S = 0.05
#: How long an anonymous caller has to send a message once its read began.
READ_S = 5.0


class AnonymousReads:
    def __init__(self, permits: int = 8) -> None:
        self._permits = asyncio.Semaphore(permits)

    def gated(self, handler: Handler) -> Handler:
        """``handler`` with its requests taken as a stream and each one read under a permit."""
        kwargs: dict[str, Any] = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.request_streaming:
            behaviour = handler.stream_stream or handler.stream_unary
            assert behaviour is not None
            streamed = self._stream_requests(behaviour)
        else:
            unary = handler.unary_stream or handler.unary_unary
            assert unary is not None
            streamed = self._one_request(unary)
        if handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(streamed, **kwargs)
        return grpc.stream_unary_rpc_method_handler(streamed, **kwargs)

    async def _read(self, requests: AsyncIterator[Any]) -> Any:
        """The next request, read under a permit; StopAsyncIteration at the stream's end."""
        try:
            async with asyncio.timeout(PERMIT_WAIT_S):
                await self._permits.acquire()
        except TimeoutError:
            raise LimitExceededError(
                ErrorCode.TOO_MANY_STREAMS,
                "this scheduler reads a few requests without a token at a time; retry later",
            ) from None
        try:
            async with asyncio.timeout(READ_S):
                return await anext(requests)
        finally:
            self._permits.release()

    def _one_request(self, unary: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.isasyncgenfunction(unary):

            async def generator(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
                async for response in unary(await self._read(requests), context):
                    yield response

            return generator

        async def coroutine(requests: AsyncIterator[Any], context: Any) -> Any:
            return await unary(await self._read(requests), context)

        return coroutine

    def _stream_requests(self, behaviour: Callable[..., Any]) -> Callable[..., Any]:
        read = self._read

        async def each(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
            with contextlib.suppress(StopAsyncIteration):
                while True:
                    yield await read(requests)

        if inspect.isasyncgenfunction(behaviour):

            async def generator(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
                async for response in behaviour(each(requests), context):
                    yield response

            return generator

        async def coroutine(requests: AsyncIterator[Any], context: Any) -> Any:
            return await behaviour(each(requests), context)

        return coroutine

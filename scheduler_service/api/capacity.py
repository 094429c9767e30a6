"""Concurrent-call capacity, kept apart for anonymous and authenticated callers (issue 15).

Health and reflection need no token and their Watch streams stay open; under one shared limit,
ten thousand anonymous streams from a few small clients left no room for a runtime's heartbeat.
Anonymous calls now draw on a small pool of their own (``AIJOB_MAX_ANONYMOUS_RPCS``), and the
authenticated roles on ``AIJOB_MAX_CONCURRENT_RPCS``, which nothing anonymous can take. Calls the
auth interceptor refuses end at once and draw on neither. A call over its pool's limit is answered
RESOURCE_EXHAUSTED (TOO_MANY_STREAMS) and ends; per-connection stream limits stay with HTTP/2
(``AIJOB_MAX_CONCURRENT_STREAMS``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc

from scheduler_service.api.auth import OPEN_SERVICES
from scheduler_service.api.handlers import Continuation, Handler, ServerInterceptor, rebuild
from scheduler_service.errors import LimitExceededError
from shared.error_codes import ErrorCode

__all__ = ["CapacityInterceptor", "Pool"]


class Pool:
    """A count of calls in progress against a limit."""

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self.in_use = 0

    def take(self) -> None:
        if self.in_use >= self.limit:
            raise LimitExceededError(
                ErrorCode.TOO_MANY_STREAMS,
                f"this scheduler runs its limit of {self.limit} {self.name} calls; retry later",
            )
        self.in_use += 1

    def give_back(self) -> None:
        self.in_use -= 1

    @contextlib.asynccontextmanager
    async def held(self, _context: Any) -> AsyncIterator[None]:
        """One slot for the life of a call."""
        self.take()
        try:
            yield
        finally:
            self.give_back()


class CapacityInterceptor(ServerInterceptor):
    """Counts each call against the anonymous or the authenticated pool for its whole life
    (a stream until it ends). Placed after the auth interceptor, so refused calls never count."""

    def __init__(self, *, authenticated: int, anonymous: int) -> None:
        self.authenticated = Pool("authenticated", authenticated)
        self.anonymous = Pool("anonymous (health, reflection)", anonymous)

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler  # type: ignore[return-value]
        method: str = handler_call_details.method
        service = method.split("/")[1] if method.count("/") >= 2 else ""
        pool = self.anonymous if service in OPEN_SERVICES else self.authenticated
        return rebuild(handler, scope=pool.held)

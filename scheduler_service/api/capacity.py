"""Concurrent-call capacity, kept apart for anonymous and authenticated callers (issue 15).

Health and reflection need no token and their Watch streams stay open; under one shared limit,
ten thousand anonymous streams from a few small clients left no room for a runtime's heartbeat.
Anonymous calls now draw on a small pool of their own (``AIJOB_MAX_ANONYMOUS_RPCS``), and the
authenticated roles on ``AIJOB_MAX_CONCURRENT_RPCS``, which nothing anonymous can take. Calls the
auth interceptor refuses end at once and draw on neither. A call over its pool's limit is answered
RESOURCE_EXHAUSTED (TOO_MANY_STREAMS) and ends; per-connection stream limits stay with HTTP/2
(``AIJOB_MAX_CONCURRENT_STREAMS``).

Within the authenticated pool (issue 33), runtimes keep a reserve that no other role can take (two
service tokens' WatchJob streams, each under its own cap, once filled the pool and runtimes'
Poll and Heartbeat were refused), and no single token holds more than half of what its role may
use, so a second caller always finds room.
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import grpc

from scheduler_service import identity
from scheduler_service.api.auth import OPEN_SERVICES
from scheduler_service.api.handlers import Continuation, Handler, ServerInterceptor, rebuild
from scheduler_service.errors import LimitExceededError
from shared.error_codes import ErrorCode

__all__ = ["CapacityInterceptor", "Pool", "SharedPool"]

RUNTIME_SERVICE = "aijob.v1.RuntimeService"
#: The part of the authenticated pool only runtimes may use.
RUNTIME_RESERVE = 0.25
#: The most of its role's room one token may hold.
TOKEN_SHARE = 0.5


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


class SharedPool(Pool):
    """The authenticated pool: a reserve for runtimes, and a cap per token."""

    def __init__(self, name: str, limit: int) -> None:
        super().__init__(name, limit)
        self.reserve = int(limit * RUNTIME_RESERVE)
        self._others = 0
        self._by_token: Counter[str] = Counter()

    def token_cap(self, runtime: bool) -> int:
        room = self.limit if runtime else self.limit - self.reserve
        return max(1, int(room * TOKEN_SHARE))

    def take_for(self, token: str, *, runtime: bool) -> None:
        if not runtime and self._others >= self.limit - self.reserve:
            raise LimitExceededError(
                ErrorCode.TOO_MANY_STREAMS,
                "this scheduler keeps its remaining calls for runtimes; retry later",
            )
        if self._by_token[token] >= self.token_cap(runtime):
            raise LimitExceededError(
                ErrorCode.TOO_MANY_STREAMS,
                f"this token holds its share of {self.token_cap(runtime)} calls; retry later",
            )
        self.take()
        self._by_token[token] += 1
        self._others += 0 if runtime else 1

    def give_back_for(self, token: str, *, runtime: bool) -> None:
        self.give_back()
        self._by_token[token] -= 1
        if self._by_token[token] <= 0:
            del self._by_token[token]
        self._others -= 0 if runtime else 1

    @contextlib.asynccontextmanager
    async def held_by_caller(self, _context: Any, *, runtime: bool) -> AsyncIterator[None]:
        """One slot for the life of a call, counted against the caller's token (bound by the
        auth interceptor before this runs)."""
        caller = identity.current()
        token = "" if caller is None else caller.token_key
        self.take_for(token, runtime=runtime)
        try:
            yield
        finally:
            self.give_back_for(token, runtime=runtime)


class CapacityInterceptor(ServerInterceptor):
    """Counts each call against the anonymous or the authenticated pool for its whole life
    (a stream until it ends). Placed after the auth interceptor, so refused calls never count."""

    def __init__(self, *, authenticated: int, anonymous: int) -> None:
        self.authenticated = SharedPool("authenticated", authenticated)
        self.anonymous = Pool("anonymous (health, reflection)", anonymous)

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler  # type: ignore[return-value]
        method: str = handler_call_details.method
        service = method.split("/")[1] if method.count("/") >= 2 else ""
        if service in OPEN_SERVICES:
            return rebuild(handler, scope=self.anonymous.held)
        scope = functools.partial(
            self.authenticated.held_by_caller, runtime=service == RUNTIME_SERVICE
        )
        return rebuild(handler, scope=scope)

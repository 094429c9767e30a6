"""Concurrent-call capacity, kept apart for each kind of caller.

Health and reflection need no token and their Watch streams stay open: anonymous calls draw on a
small pool of their own (``AIJOB_MAX_ANONYMOUS_RPCS``), which nothing authenticated shares. The
authenticated pool (``AIJOB_MAX_CONCURRENT_RPCS``) is split into rooms: runtimes', operators'
(admin and viewer tokens) and internal services'. A role's calls use its own room only, so two
service tokens' watch streams can never refuse a runtime's heartbeat or an operator's
ListJobs, and no token holds more than half of its room, so a second caller of the same role
always finds some. Calls the auth interceptor refuses end at once and draw on nothing. A call
over its room's limit is answered RESOURCE_EXHAUSTED (TOO_MANY_STREAMS) and ends; per-connection
stream limits stay with HTTP/2 (``AIJOB_MAX_CONCURRENT_STREAMS``).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import grpc

from scheduler_service.api.anonymous_reads import AnonymousReads
from scheduler_service.api.auth import OPEN_SERVICES
from scheduler_service.api.handlers import Continuation, Handler, ServerInterceptor, rebuild
from scheduler_service.core import identity
from scheduler_service.core.errors import LimitExceededError
from shared.error_codes import ErrorCode

__all__ = ["CapacityInterceptor", "Pool", "SharedPool"]

#: The authenticated pool's rooms, as shares of it: one for runtimes, one for operators (admin
#: and viewer tokens), the rest for internal services. No role's calls take another's room.
RUNTIME_SHARE = 0.3
OPERATOR_SHARE = 0.1
#: The most of its role's room one token may hold.
TOKEN_SHARE = 0.5
#: Which room each role's calls are counted in.
ROOM_OF_ROLE = {"runtime": "runtimes", "admin": "operators", "viewer": "operators"}
SERVICES_ROOM = "services"


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
    """The authenticated pool: a room for each kind of caller, and a cap per token."""

    def __init__(self, name: str, limit: int) -> None:
        super().__init__(name, limit)
        runtimes = int(limit * RUNTIME_SHARE)
        operators = max(1, int(limit * OPERATOR_SHARE))
        self.rooms = {
            "runtimes": Pool("runtime", runtimes),
            "operators": Pool("operator", operators),
            SERVICES_ROOM: Pool("service", max(1, limit - runtimes - operators)),
        }
        self._by_token: Counter[str] = Counter()

    def token_cap(self, room: str) -> int:
        return max(1, int(self.rooms[room].limit * TOKEN_SHARE))

    def take_for(self, token: str, room: str) -> None:
        if self._by_token[token] >= self.token_cap(room):
            raise LimitExceededError(
                ErrorCode.TOO_MANY_STREAMS,
                f"this token holds its share of {self.token_cap(room)} calls; retry later",
            )
        self.rooms[room].take()
        self._by_token[token] += 1
        self.in_use += 1

    def give_back_for(self, token: str, room: str) -> None:
        self.rooms[room].give_back()
        self.in_use -= 1
        self._by_token[token] -= 1
        if self._by_token[token] <= 0:
            del self._by_token[token]

    @contextlib.asynccontextmanager
    async def held_by_caller(self, _context: Any) -> AsyncIterator[None]:
        """One slot for the life of a call, in its caller's room and counted against its token
        (bound by the auth interceptor before this runs)."""
        caller = identity.current()
        token = "" if caller is None else caller.token_key
        room = SERVICES_ROOM if caller is None else ROOM_OF_ROLE.get(caller.role, SERVICES_ROOM)
        self.take_for(token, room)
        try:
            yield
        finally:
            self.give_back_for(token, room)


class CapacityInterceptor(ServerInterceptor):
    """Counts each call against the anonymous or the authenticated pool for its whole life
    (a stream until it ends). Placed after the auth interceptor, so refused calls never count."""

    def __init__(self, *, authenticated: int, anonymous: int) -> None:
        self.authenticated = SharedPool("authenticated", authenticated)
        self.anonymous = Pool("anonymous (health, reflection)", anonymous)
        self._anonymous_reads = AnonymousReads()

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler  # type: ignore[return-value]
        method: str = handler_call_details.method
        service = method.split("/")[1] if method.count("/") >= 2 else ""
        if service in OPEN_SERVICES:
            return rebuild(self._anonymous_reads.gated(handler), scope=self.anonymous.held)
        return rebuild(handler, scope=self.authenticated.held_by_caller)

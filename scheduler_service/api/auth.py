"""Authentication: one server interceptor, default deny.

Each service needs its role's bearer token (``authorization: Bearer <token>``): RuntimeService a
runtime token, JobService a service token, AdminService an admin token. Health and reflection stay
open. No (or an unknown) token is UNAUTHENTICATED; a token of another role is PERMISSION_DENIED;
a method of no known service is PERMISSION_DENIED. Tokens are compared in constant time, against
every configured token, so timing does not tell which one nearly matched.

A runtime token may be bound to an instance-id prefix: its calls then act only for instances
whose id starts with it (scheduler_service/core/identity.py). Refusals are counted in
``aijob_refused_calls_total``; their log lines are rate-limited, so a flood of bad calls cannot
flood the log.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import grpc

from scheduler_service.api.handlers import message_json, rebuild
from scheduler_service.api.status import Continuation, Handler, ServerInterceptor, abort_with
from scheduler_service.core import identity
from scheduler_service.core.log_throttle import LogThrottle
from scheduler_service.services import metrics
from scheduler_service.sql.audit import AuditRecord
from shared.config import named_token
from shared.error_codes import ErrorCode

__all__ = ["AuthInterceptor", "Caller", "RefusalLog", "Role", "TokenSet"]

log = logging.getLogger(__name__)


ADMIN_SERVICE = "aijob.v1.AdminService"
#: Records an action the authentication refused a known token.
RefusedActions = Callable[[AuditRecord], Awaitable[None]]


class Role(StrEnum):
    RUNTIME = "runtime"
    SERVICE = "service"
    ADMIN = "admin"
    #: Reads every admin view, changes nothing (AIJOB_VIEWER_TOKENS).
    VIEWER = "viewer"


REQUIRED_ROLE: dict[str, Role] = {
    "aijob.v1.RuntimeService": Role.RUNTIME,
    "aijob.v1.JobService": Role.SERVICE,
    "aijob.v1.AdminService": Role.ADMIN,
}
#: The AdminService methods that change nothing: a viewer token may call these.
VIEWER_METHODS = frozenset(
    {
        "ListJobs",
        "GetJob",
        "GetQueueStats",
        "ListModelLimits",
        "GetUserUsage",
        "ListAuditEntries",
        "GetJobTimeline",
        "GetJobTree",
        "GetModelRoute",
        "ListJobTypes",
    }
)
OPEN_SERVICES = frozenset(
    {
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
        "grpc.reflection.v1.ServerReflection",
    }
)


@dataclass(frozen=True, slots=True)
class Caller:
    role: Role
    #: A digest of the token, to count what one token holds (never the token itself).
    token_key: str = ""
    #: For a runtime token bound to an identity: the instance-id prefix it may act for.
    instance_prefix: str | None = None
    #: Who the token is, for the audit log: its name, else ``token-`` and its digest's start.
    name: str = ""


def _caller(role: Role, entry: str, prefix: str | None = None) -> tuple[Caller, bytes]:
    name, token = named_token(entry)
    key = _key_of(token)
    return Caller(role, key, prefix, name or f"token-{key[:8]}"), token.encode()


class TokenSet:
    def __init__(
        self,
        tokens: Mapping[Role, Iterable[str]],
        bound_runtimes: Iterable[tuple[str, str]] = (),
    ) -> None:
        """``tokens`` per role; ``bound_runtimes`` are (instance-id prefix, token) pairs of
        runtime tokens that act only for instances with that prefix."""
        self._tokens = [
            _caller(role, t) for role, values in tokens.items() for t in values if t
        ] + [_caller(Role.RUNTIME, t, prefix) for prefix, t in bound_runtimes if t]

    def caller_of(self, token: str) -> Caller | None:
        presented = token.encode()
        found: Caller | None = None
        for caller, expected in self._tokens:
            # No early exit: every comparison runs whatever matched.
            if hmac.compare_digest(presented, expected):
                found = caller
        return found

    def role_of(self, token: str) -> Role | None:
        caller = self.caller_of(token)
        return None if caller is None else caller.role

    def __bool__(self) -> bool:
        return bool(self._tokens)


def _key_of(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


class RefusalLog:
    """One log line per refusal code per ``interval_s`` at most, saying how many calls it
    stands for; every refusal is counted in the metric."""

    def __init__(
        self, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._throttle = LogThrottle(interval_s, clock)

    def refused(self, code: str, method: str) -> None:
        metrics.REFUSED_CALLS.labels(code).inc()
        also = self._throttle.admit(code)
        if also is None:
            return
        log.info(
            "call refused",
            extra={"action": "auth_refused", "method": method, "code": code, "alsoRefused": also},
        )


def _bearer(metadata: Iterable[tuple[str, str | bytes]] | None) -> str:
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else ""
    return ""


class AuthInterceptor(ServerInterceptor):
    def __init__(
        self,
        tokens: TokenSet,
        *,
        reflection: bool = True,
        refusals: RefusalLog | None = None,
        owners: identity.InstanceOwners | None = None,
        audit: RefusedActions | None = None,
    ) -> None:
        self._tokens = tokens
        self._owners = owners
        self._audit = audit
        self._refusals = refusals or RefusalLog()
        self._open = (
            OPEN_SERVICES
            if reflection
            else OPEN_SERVICES
            - {
                "grpc.reflection.v1alpha.ServerReflection",
                "grpc.reflection.v1.ServerReflection",
            }
        )

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler:  # grpc treats a None handler as "no such method"
        handler = await continuation(handler_call_details)
        method: str = handler_call_details.method
        service = method.split("/")[1] if method.count("/") >= 2 else ""
        if handler is None or service in self._open:
            return handler  # type: ignore[return-value]
        token = _bearer(handler_call_details.invocation_metadata)
        caller = self._tokens.caller_of(token)
        refusal = _refusal(service, method.rsplit("/", 1)[-1], caller, token)
        if refusal is not None:
            code, reason, message = refusal
            self._refusals.refused(code.name, method)
            if caller is not None and self._audit is not None and service == ADMIN_SERVICE:
                refused = _refusing(handler, code, reason, message, read=True)
                action = method.rsplit("/", 1)[-1]
                return _recorded_refusal(self._audit, refused, caller, action, (code, message))
            return _refusing(handler, code, reason, message)
        if caller is None:
            return handler
        bound = identity.BoundCaller(
            caller.token_key, caller.instance_prefix, self._owners, caller.name, caller.role.value
        )
        return _bound(handler, bound)


def _recorded_refusal(
    audit: RefusedActions,
    refused: Handler,
    caller: Caller,
    action: str,
    outcome: tuple[grpc.StatusCode, str],
) -> Handler:
    """``refused``, recorded in the audit log before it answers (a known token: it has a name)."""

    refuse = refused.unary_unary
    if refuse is None:  # every admin action is unary; a stream is refused unrecorded
        return refused

    async def record_then_refuse(request: Any, context: Any) -> Any:
        code, message = outcome
        target = message_json(request)
        await audit(AuditRecord(caller.name, caller.role.value, action, target, code.name, message))
        return await refuse(request, context)

    return rebuild(refused, replace_with=record_then_refuse)


def _refusal(
    service: str, method: str, caller: Caller | None, token: str
) -> tuple[grpc.StatusCode, ErrorCode, str] | None:
    required = REQUIRED_ROLE.get(service)
    if required is None:
        return grpc.StatusCode.PERMISSION_DENIED, ErrorCode.PERMISSION_DENIED, "no access"
    if not token:
        return (
            grpc.StatusCode.UNAUTHENTICATED,
            ErrorCode.UNAUTHENTICATED,
            "missing bearer token (authorization: Bearer <token>)",
        )
    if caller is None:
        return grpc.StatusCode.UNAUTHENTICATED, ErrorCode.UNAUTHENTICATED, "unknown token"
    if caller.role is Role.VIEWER and required is Role.ADMIN:
        return _viewer_refusal(method)
    if caller.role is not required:
        return (
            grpc.StatusCode.PERMISSION_DENIED,
            ErrorCode.PERMISSION_DENIED,
            f"{_article(caller.role.value)} {caller.role.value} token cannot call {service}; it"
            f" takes the {required.value} role",
        )
    return None


def _viewer_refusal(method: str) -> tuple[grpc.StatusCode, ErrorCode, str] | None:
    if method in VIEWER_METHODS:
        return None
    return (
        grpc.StatusCode.PERMISSION_DENIED,
        ErrorCode.PERMISSION_DENIED,
        f"a viewer token reads the admin views and cannot call {method}",
    )


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _bound(handler: Handler, caller: identity.BoundCaller) -> Handler:
    """``handler`` run as ``caller`` (acting only for instances of its prefix, if bound).

    grpc.aio runs each call in a task of its own, so the binding set here ends with the call
    (and is copied into the tasks the call starts, such as a Poll stream's reader)."""

    @contextlib.asynccontextmanager
    async def bound(_context: Any) -> AsyncIterator[None]:
        identity.bind(caller)
        yield

    return rebuild(handler, scope=bound)


def _refusing(
    handler: Handler,
    code: grpc.StatusCode,
    reason: ErrorCode,
    message: str,
    *,
    read: bool = False,
) -> Handler:
    """A handler that only refuses the call: of ``handler``'s shape when the request is to be
    read (an audited refusal names it), else one that takes the request as a stream and never
    reads it. gRPC receives a unary request whole before any handler runs; a request stream is
    only read when asked, so an unknown caller's 4 MiB message costs the server no more than the
    HTTP/2 window it was allowed before the refusal closed the stream."""

    async def refuse(_request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await abort_with(context, code, reason, message)

    if read:
        return rebuild(handler, replace_with=refuse)
    kwargs: dict[str, Any] = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(refuse, **kwargs)
    return grpc.stream_unary_rpc_method_handler(refuse, **kwargs)

"""Authentication: one server interceptor, default deny.

Each service needs its role's bearer token (``authorization: Bearer <token>``): RuntimeService a
runtime token, JobService a service token, AdminService an admin token. Health and reflection stay
open. No (or an unknown) token is UNAUTHENTICATED; a token of another role is PERMISSION_DENIED;
a method of no known service is PERMISSION_DENIED. Tokens are compared in constant time, against
every configured token, so timing does not tell which one nearly matched.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from enum import StrEnum
from typing import Any

import grpc

from scheduler_service.api.status import Continuation, Handler, ServerInterceptor, abort_with
from shared.error_codes import ErrorCode

__all__ = ["AuthInterceptor", "Role", "TokenSet"]

log = logging.getLogger(__name__)


class Role(StrEnum):
    RUNTIME = "runtime"
    SERVICE = "service"
    ADMIN = "admin"


REQUIRED_ROLE: dict[str, Role] = {
    "aijob.v1.RuntimeService": Role.RUNTIME,
    "aijob.v1.JobService": Role.SERVICE,
    "aijob.v1.AdminService": Role.ADMIN,
}
OPEN_SERVICES = frozenset(
    {
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
        "grpc.reflection.v1.ServerReflection",
    }
)


class TokenSet:
    def __init__(self, tokens: Mapping[Role, Iterable[str]]) -> None:
        self._tokens = [(role, t.encode()) for role, values in tokens.items() for t in values if t]

    def role_of(self, token: str) -> Role | None:
        presented = token.encode()
        found: Role | None = None
        for role, expected in self._tokens:
            # No early exit: every comparison runs whatever matched.
            if hmac.compare_digest(presented, expected):
                found = role
        return found

    def __bool__(self) -> bool:
        return bool(self._tokens)


def _bearer(metadata: Iterable[tuple[str, str | bytes]] | None) -> str:
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else ""
    return ""


class AuthInterceptor(ServerInterceptor):
    def __init__(self, tokens: TokenSet, *, reflection: bool = True) -> None:
        self._tokens = tokens
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
        refusal = self._refusal(service, _bearer(handler_call_details.invocation_metadata))
        if refusal is None:
            return handler
        code, reason, message = refusal
        log.info(
            "call refused", extra={"action": "auth_refused", "method": method, "code": code.name}
        )
        return _refusing(handler, code, reason, message)

    def _refusal(self, service: str, token: str) -> tuple[grpc.StatusCode, ErrorCode, str] | None:
        required = REQUIRED_ROLE.get(service)
        if required is None:
            return grpc.StatusCode.PERMISSION_DENIED, ErrorCode.PERMISSION_DENIED, "no access"
        if not token:
            return (
                grpc.StatusCode.UNAUTHENTICATED,
                ErrorCode.UNAUTHENTICATED,
                "missing bearer token (authorization: Bearer <token>)",
            )
        role = self._tokens.role_of(token)
        if role is None:
            return grpc.StatusCode.UNAUTHENTICATED, ErrorCode.UNAUTHENTICATED, "unknown token"
        if role is not required:
            return (
                grpc.StatusCode.PERMISSION_DENIED,
                ErrorCode.PERMISSION_DENIED,
                f"a {role.value} token cannot call {service}; it takes the {required.value} role",
            )
        return None


def _refusing(handler: Handler, code: grpc.StatusCode, reason: ErrorCode, message: str) -> Handler:
    """A handler of the same shape as ``handler`` that only refuses the call."""

    async def unary(_request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await abort_with(context, code, reason, message)

    async def streaming(
        _request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Any]:
        await abort_with(context, code, reason, message)
        yield  # pragma: no cover - makes this an async generator

    kwargs = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(streaming, **kwargs)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(unary, **kwargs)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(streaming, **kwargs)
    return grpc.unary_unary_rpc_method_handler(unary, **kwargs)

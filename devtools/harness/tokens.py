"""The bearer tokens and settings tests configure their schedulers with."""

from __future__ import annotations

from typing import Any

import grpc

RUNTIME_TOKEN = "test-runtime-token"
SERVICE_TOKEN = "test-service-token"
ADMIN_TOKEN = "test-admin-token"

SETTINGS: dict[str, Any] = {
    "runtime_tokens": RUNTIME_TOKEN,
    "service_tokens": SERVICE_TOKEN,
    "admin_tokens": ADMIN_TOKEN,
    # Model calls carry a pseudonymous user_id, as in production (scheduler_service/provider_ids).
    "provider_user_id_key": "test-provider-user-id-key-of-32-bytes-or-more",
    # No peak window: prices and off-peak jobs must not depend on the hour a test runs at; the
    # tests of peak hours set their own (tests/protocol/test_cheap_hours.py, bench/cost.py).
    "peak_hours": "",
}
ENV = {f"AIJOB_{key.upper()}": value for key, value in SETTINGS.items()}


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


_TOKEN_OF_SERVICE = {
    "aijob.v1.RuntimeService": RUNTIME_TOKEN,
    "aijob.v1.JobService": SERVICE_TOKEN,
    "aijob.v1.AdminService": ADMIN_TOKEN,
}


class _RoleTokens:
    """Adds the right role's token to calls that carry none (tests' direct stub calls)."""

    def _with_token(self, details: Any) -> Any:
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        metadata = list(details.metadata or [])
        token = _TOKEN_OF_SERVICE.get(method.split("/")[1])
        if token and not any(key == "authorization" for key, _ in metadata):
            metadata.extend(bearer(token))
        return grpc.aio.ClientCallDetails(
            details.method,
            details.timeout,
            grpc.aio.Metadata(*metadata),
            details.credentials,
            details.wait_for_ready,
        )


# grpc.aio files each interceptor under one kind only, so each kind gets its own class.
class _UnaryUnary(_RoleTokens, grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[type-arg]
    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._with_token(details), request)


class _UnaryStream(_RoleTokens, grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[type-arg]
    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._with_token(details), request)


class _StreamUnary(_RoleTokens, grpc.aio.StreamUnaryClientInterceptor):  # type: ignore[type-arg]
    async def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        return await continuation(self._with_token(details), requests)


class _StreamStream(_RoleTokens, grpc.aio.StreamStreamClientInterceptor):  # type: ignore[type-arg]
    async def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return await continuation(self._with_token(details), requests)


def channel(address: str, options: list[tuple[str, int]] | None = None) -> grpc.aio.Channel:
    """A channel whose calls carry the token of the service they call, unless they set one."""
    kinds = (_UnaryUnary(), _UnaryStream(), _StreamUnary(), _StreamStream())
    return grpc.aio.insecure_channel(address, options=options, interceptors=kinds)  # type: ignore[arg-type]

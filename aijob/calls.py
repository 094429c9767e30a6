"""What both API clients are built on: a channel and a token from the settings, and every call
with a deadline, retried with exponential backoff and full jitter while it is ``UNAVAILABLE`` or
``RESOURCE_EXHAUSTED`` (after the server's ``google.rpc.RetryInfo`` delay when it gives one)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from aijob.connection import ClientSettings
from aijob.errors import (
    error_details,
    error_of,
)

__all__ = ["RETRIED", "BaseClient", "Calls"]

T = TypeVar("T")
RETRIED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED})


class Calls:
    """Deadlines and retries around the stubs' calls."""

    def __init__(self, timeout_s: float, max_backoff_s: float) -> None:
        self.timeout_s = timeout_s
        self.max_backoff_s = max_backoff_s

    async def call(
        self, send: Callable[[float], Awaitable[T]], timeout_s: float | None = None
    ) -> T:
        """``send(remaining_s)`` until it answers, is refused for good, or the deadline passes."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        attempt = 0
        while True:
            remaining = deadline - time.monotonic()
            try:
                return await send(max(0.001, remaining))
            except grpc.aio.AioRpcError as error:
                attempt += 1
                _, _, server_delay = error_details(error)
                backoff = server_delay or random.uniform(
                    0, min(self.max_backoff_s, 0.1 * 2**attempt)
                )
                if error.code() not in RETRIED or time.monotonic() + backoff >= deadline:
                    raise error_of(error) from None
                await asyncio.sleep(backoff)


class BaseClient:
    #: Whose token the client sends: "service" or "admin".
    _role = "service"
    _stub: Any

    def __init__(
        self,
        address: str | None = None,
        *,
        token: str | None = None,
        settings: ClientSettings | None = None,
        timeout_s: float = 30.0,
        max_backoff_s: float = 5.0,
    ) -> None:
        self._settings = settings or ClientSettings()
        self._channel = (
            self._settings.channel()
            if address is None
            else ClientSettings(scheduler_addr=address, tls_ca=self._settings.tls_ca).channel()
        )
        self._token = token or self._settings.token(self._role)
        self._calls = Calls(timeout_s, max_backoff_s)

    def _metadata(self, *extra: tuple[str, str]) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self._token}"), *extra)

    def _call_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata()

    async def call(self, method: str, request: Any, *, timeout_s: float | None = None) -> Any:
        """Any unary RPC of the client's service, by name (``"CreateJob"``), with the client's
        token, deadline, retries and error classes: for an RPC no typed method covers yet."""
        return await self._unary(getattr(self._stub, method), request, timeout_s)

    async def _unary(
        self, rpc: Callable[..., Awaitable[T]], request: Any, timeout_s: float | None = None
    ) -> T:
        """``rpc(request)`` with the client's token, deadline, retries and error classes: what
        the typed methods are built on."""
        metadata = self._call_metadata()
        return await self._calls.call(
            lambda t: rpc(request, metadata=metadata, timeout=t), timeout_s
        )

    async def close(self) -> None:
        await self._channel.close(None)

    async def __aenter__(self: T) -> T:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

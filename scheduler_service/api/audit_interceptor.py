"""Every admin action into the audit log (issue 32), whichever client called: the console, the
CLI or grpcurl. One interceptor around the AdminService methods that change something; the
methods a viewer may call (reads) are not recorded. A call the authentication refused never runs,
so it is not an action (the refusal is counted and logged by the auth interceptor)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from scheduler_service import identity
from scheduler_service.api.auth import VIEWER_METHODS
from scheduler_service.api.handlers import (
    Continuation,
    Handler,
    Scope,
    ServerInterceptor,
    rebuild,
)
from scheduler_service.audit import AuditLog
from scheduler_service.errors import SchedulerError

__all__ = ["AuditInterceptor"]

log = logging.getLogger(__name__)

ADMIN_SERVICE = "aijob.v1.AdminService"
#: The request of the call being answered, as the audit log keeps it.
_TARGET: ContextVar[str] = ContextVar("aijob_audit_target", default="{}")


def _remember(request: Any) -> Any:
    if isinstance(request, Message):
        _TARGET.set(json_format.MessageToJson(request, indent=None, sort_keys=True))
    return request


class AuditInterceptor(ServerInterceptor):
    def __init__(self, audit: AuditLog) -> None:
        self._audit = audit

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler:
        handler = await continuation(handler_call_details)
        service, _, action = handler_call_details.method.strip("/").partition("/")
        if handler is None or service != ADMIN_SERVICE or action in VIEWER_METHODS:
            return handler  # type: ignore[return-value]
        return rebuild(handler, scope=self._recorded(action), prepare=_remember)

    def _recorded(self, action: str) -> Scope:
        @contextlib.asynccontextmanager
        async def scope(_context: Any) -> AsyncIterator[None]:
            outcome = "OK"
            try:
                yield
            except SchedulerError as exc:
                outcome = exc.status
                raise
            except BaseException:
                outcome = "INTERNAL"
                raise
            finally:
                await self._record(action, outcome)

        return scope

    async def _record(self, action: str, outcome: str) -> None:
        caller = identity.current()
        actor = caller.name if caller is not None else ""
        role = caller.role if caller is not None else ""
        try:
            await self._audit.record(actor, role, action, _TARGET.get(), outcome)
        except Exception:  # the action stands; the log line keeps what the table could not
            log.exception(
                "audit entry not written",
                extra={"action": "audit_error", "audited": action, "actor": actor},
            )

"""Every admin action into the audit log, whichever client called: the console, the CLI or
grpcurl. One interceptor around the AdminService methods that change something; the methods a
viewer may call (reads) are not recorded.

An action, once accepted, runs to its end on the server and is recorded with what it did (the
response's counts): a client that cancels or whose deadline passes loses only the answer, never
half of a bulk action and never its entry. A known token refused an action by the authentication
(a viewer's, a service's) is recorded too, with the refusal, by :meth:`AuditInterceptor.refused`;
an unknown token names nobody, and is counted and logged by the auth interceptor instead.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from scheduler_service.api.auth import ADMIN_SERVICE, VIEWER_METHODS
from scheduler_service.api.handlers import (
    Continuation,
    Handler,
    ServerInterceptor,
    message_json,
    rebuild,
)
from scheduler_service.core import identity
from scheduler_service.core.errors import SchedulerError
from scheduler_service.sql.audit import AuditLog, AuditRecord

__all__ = ["AuditInterceptor"]

log = logging.getLogger(__name__)

#: Most of a response the log keeps as what the action did.
MAX_DETAIL_CHARS = 2_000


def what_it_did(response: Any) -> str:
    """An action's response as the audit log keeps it: its counts, ids and outcome (of it and of
    the messages it holds, such as the job it changed), as JSON."""
    if not isinstance(response, Message):
        return ""
    kept: dict[str, Any] = {}
    pending = [json_format.MessageToDict(response)]
    while pending:
        for key, value in pending.pop().items():
            if isinstance(value, dict):
                pending.append(value)
            elif _telling(key, value):
                kept.setdefault(key, value)
    return json.dumps(kept, sort_keys=True)[:MAX_DETAIL_CHARS]


def _telling(key: str, value: Any) -> bool:
    if key.endswith("Id") or key in {"outcome", "lifecycleStatus"}:
        return True
    return isinstance(value, int) or (isinstance(value, str) and value.isdigit())


class AuditInterceptor(ServerInterceptor):
    def __init__(self, audit: AuditLog) -> None:
        self._audit = audit
        #: Actions still running after their client went away.
        self._running: set[asyncio.Task[Any]] = set()

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler:
        handler = await continuation(handler_call_details)
        service, _, action = handler_call_details.method.strip("/").partition("/")
        if handler is None or service != ADMIN_SERVICE or action in VIEWER_METHODS:
            return handler  # type: ignore[return-value]
        if handler.request_streaming or handler.response_streaming:
            return handler
        behaviour = handler.unary_unary
        assert behaviour is not None

        async def run_to_the_end(request: Any, context: Any) -> Any:
            task = asyncio.get_running_loop().create_task(
                self._act(behaviour, request, context, action)
            )
            self._running.add(task)
            task.add_done_callback(self._running.discard)
            return await asyncio.shield(task)

        return rebuild(handler, replace_with=run_to_the_end)

    async def _act(self, behaviour: Any, request: Any, context: Any, action: str) -> Any:
        outcome, detail = "OK", ""
        try:
            response = await behaviour(request, context)
            detail = what_it_did(response)
            return response
        except SchedulerError as exc:
            outcome, detail = exc.status, exc.message
            raise
        except BaseException:
            outcome = "INTERNAL"
            raise
        finally:
            caller = identity.current()
            actor = caller.name if caller is not None else ""
            role = caller.role if caller is not None else ""
            await self._record(
                AuditRecord(actor, role, action, message_json(request), outcome, detail)
            )

    async def refused(self, record: AuditRecord) -> None:
        """Record an action the authentication refused a known token."""
        if record.action not in VIEWER_METHODS:
            await self._record(record)

    async def _record(self, record: AuditRecord) -> None:
        try:
            await self._audit.record(record)
        except Exception:  # the action stands; the log line keeps what the table could not
            log.exception(
                "audit entry not written",
                extra={"action": "audit_error", "audited": record.action, "actor": record.actor},
            )

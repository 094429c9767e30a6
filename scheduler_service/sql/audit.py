"""The audit log: each admin action recorded in its own transaction once it is answered — who by
(the token's name and role), what (the method and the request it named), when (the database's
clock), the outcome and what it did (its response, or why it was refused) — and read newest
first, a page at a time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import cast

from sqlalchemy import Table, insert, select

from scheduler_service.sql.db.audit_models import AiAuditEntry
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.uow import SqlTransaction, SqlUnitOfWork

__all__ = ["MAX_TARGET_CHARS", "AuditEntry", "AuditLog", "AuditRecord"]

_audit = cast(Table, AiAuditEntry.__table__)
#: Most of a request the log keeps (a bulk request names many jobs).
MAX_TARGET_CHARS = 16_000


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One action as it is recorded."""

    actor: str
    role: str
    action: str
    target: str
    outcome: str
    #: What the action did (its response, as JSON), or why it was refused.
    detail: str = ""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    entry_id: int
    occurred_at: datetime
    actor: str
    role: str
    action: str
    target: str
    outcome: str
    #: What the action did (its response, as JSON), or why it was refused.
    detail: str


class AuditLog:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self._uow = uow

    async def record(self, record: AuditRecord) -> None:
        row = {
            "occurredAt": db_now(),
            "actor": record.actor[:128],
            "role": record.role[:16],
            "action": record.action[:64],
            "target": record.target[:MAX_TARGET_CHARS],
            "outcome": record.outcome[:32],
            "detail": record.detail[:MAX_TARGET_CHARS],
        }

        async def write(tx: SqlTransaction) -> None:
            await tx.conn.execute(insert(_audit).values(row))

        await self._uow.run(write)

    async def page(self, size: int, before_id: int | None) -> list[AuditEntry]:
        """Up to ``size`` entries, newest first, older than ``before_id`` when given."""
        query = select(_audit).order_by(_audit.c.id.desc()).limit(size)
        if before_id is not None:
            query = query.where(_audit.c.id < before_id)

        async def read(tx: SqlTransaction) -> list[AuditEntry]:
            rows = await tx.conn.execute(query)
            return [
                AuditEntry(
                    r.id,
                    r.occurredAt,
                    r.actor,
                    r.role,
                    r.action,
                    r.target,
                    r.outcome,
                    r.detail or "",
                )
                for r in rows
            ]

        return await self._uow.read(read)

"""The audit log's table: every admin action, who by, on what, its outcome and what it did."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from scheduler_service.sql.db.base import MYSQL_TABLE_ARGS, Base, Timestamp

__all__ = ["AiAuditEntry"]


class AiAuditEntry(Base):
    __tablename__ = "AiAuditEntry"
    __table_args__ = (Index("idx_AiAuditEntry_occurredAt", "occurredAt"), MYSQL_TABLE_ARGS)

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    occurredAt: Mapped[datetime] = mapped_column(Timestamp)
    #: The token's name (``name=token`` in the settings), else ``token-`` and its digest's start.
    actor: Mapped[str] = mapped_column(String(128))
    role: Mapped[str] = mapped_column(String(16))
    #: The AdminService method.
    action: Mapped[str] = mapped_column(String(64))
    #: What it named: the request, as JSON (job ids, user ids, model keys, limits).
    target: Mapped[str] = mapped_column(Text)
    #: ``OK``, or the gRPC status it was answered with.
    outcome: Mapped[str] = mapped_column(String(32))
    #: What the action did (its response, as JSON: a bulk action's counts), or why it was
    #: refused.
    detail: Mapped[str | None] = mapped_column(Text)

"""Model routes and circuit breakers (migration 0022)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from scheduler_service.sql.db.base import MYSQL_TABLE_ARGS, Base, Timestamp

__all__ = ["AiModelBreaker", "AiModelRoute"]


class AiModelRoute(Base):
    """An operator's model route for a job type (core/routes.py): the tiers as JSON
    ``[[provider, model], ...]``, primary first."""

    __tablename__ = "AiModelRoute"
    __table_args__ = (MYSQL_TABLE_ARGS,)

    jobType: Mapped[str] = mapped_column(String(64), primary_key=True)
    tiers: Mapped[str] = mapped_column(Text)
    updatedAt: Mapped[datetime] = mapped_column(Timestamp)


class AiModelBreaker(Base):
    """The circuit breaker of one model key (core/breakers.py): a provider's model on the
    platform's key (``credentialId`` empty) or on one user's stored credential. A row exists
    once the key first failed as a provider fails; every claim reads the rows."""

    __tablename__ = "AiModelBreaker"
    __table_args__ = (MYSQL_TABLE_ARGS,)

    provider: Mapped[str] = mapped_column(String(64), primary_key=True)
    model: Mapped[str] = mapped_column(String(128), primary_key=True)
    credentialId: Mapped[str] = mapped_column(String(191), primary_key=True)
    state: Mapped[str] = mapped_column(String(16), server_default="closed")
    failures: Mapped[int] = mapped_column(Integer, server_default="0")
    since: Mapped[datetime | None] = mapped_column(Timestamp)
    held: Mapped[bool] = mapped_column(Boolean, server_default="0")
    #: Times it opened: what the metrics and the console count.
    openedTotal: Mapped[int] = mapped_column(BigInteger, server_default="0")
    updatedAt: Mapped[datetime] = mapped_column(Timestamp)

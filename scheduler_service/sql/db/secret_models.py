"""The engine's own secrets (migration 0021)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from scheduler_service.sql.db.base import MYSQL_TABLE_ARGS, Base, Timestamp

__all__ = ["AiEngineSecret"]


class AiEngineSecret(Base):
    """Secrets the engine makes for itself, one row each, the same for every replica: the key
    of DeepSeek ``user_id`` pseudonyms when no AIJOB_PROVIDER_USER_ID_KEY is set."""

    __tablename__ = "AiEngineSecret"
    __table_args__ = (MYSQL_TABLE_ARGS,)

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    secret: Mapped[str] = mapped_column(String(128))
    createdAt: Mapped[datetime] = mapped_column(Timestamp)

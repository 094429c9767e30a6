"""Budgets and the spend they are judged against (core/budgets.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, String
from sqlalchemy.orm import Mapped, mapped_column

from scheduler_service.sql.db.base import MYSQL_TABLE_ARGS, Base, Timestamp

__all__ = ["AiUserBudget", "AiUserSpend"]


class AiUserBudget(Base):
    """A user's daily budget set by an operator: NULL takes the settings' default, 0 is none."""

    __tablename__ = "AiUserBudget"
    __table_args__ = (MYSQL_TABLE_ARGS,)

    userId: Mapped[str] = mapped_column(String(191), primary_key=True)
    dailyTokens: Mapped[int | None] = mapped_column(BigInteger)
    dailyCostMicros: Mapped[int | None] = mapped_column(BigInteger)
    updatedAt: Mapped[datetime] = mapped_column(Timestamp)


class AiUserSpend(Base):
    """What a user spent on one UTC day (``day`` is its midnight), written with the ledger."""

    __tablename__ = "AiUserSpend"
    __table_args__ = (MYSQL_TABLE_ARGS,)

    userId: Mapped[str] = mapped_column(String(191), primary_key=True)
    day: Mapped[datetime] = mapped_column(Timestamp, primary_key=True)
    tokens: Mapped[int] = mapped_column(BigInteger, server_default="0")
    costMicros: Mapped[int] = mapped_column(BigInteger, server_default="0")

"""System A's tables beside the engine's: the job types it still owns, and its results
table, which the engine's projectors of those types write once it runs them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from scheduler_service.sql.db.base import ID, MYSQL_TABLE_ARGS, Base, Timestamp

__all__ = ["AiAnalysisResult", "AiLegacyJobType"]


class AiLegacyJobType(Base):
    """A job type System A still owns: its rows are the legacy worker's, never the engine's."""

    __tablename__ = "AiLegacyJobType"
    __table_args__ = (MYSQL_TABLE_ARGS,)

    jobType: Mapped[str] = mapped_column(String(64), primary_key=True)


class AiAnalysisResult(Base):
    """System A's results table, in its legacy shape (migrations 0001 and 0013): one evaluation
    of an ``active-recall`` or ``feynman-evaluation`` job. The engine's projector of those types
    writes here once it runs them (M-AI-04)."""

    __tablename__ = "AiAnalysisResult"
    __table_args__ = (
        Index("AiAnalysisResult_jobId_idx", "jobId"),
        Index("AiAnalysisResult_userId_idx", "userId"),
        {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_unicode_ci"},
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    jobId: Mapped[str] = mapped_column(ID)
    userId: Mapped[str] = mapped_column(String(191))
    answerId: Mapped[str | None] = mapped_column(String(191))
    analysisType: Mapped[str] = mapped_column(String(32))
    score: Mapped[int | None] = mapped_column(Integer)
    result: Mapped[Any] = mapped_column(JSON)
    createdAt: Mapped[datetime] = mapped_column(Timestamp)

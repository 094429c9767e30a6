"""Baseline: the legacy 13-column AiAnalysisJob table (the system this engine replaces) and its
results table, AiAnalysisResult.

Production databases already hold these tables with rows; there they are left untouched. On an
empty database they are created exactly as production has them, so that both kinds of database
reach the unified schema through the same expand migration (0002). (Databases that passed this
revision before it knew AiAnalysisResult get it from 0013, by the same definition.)

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")


def upgrade() -> None:
    bind = op.get_bind()
    now = (
        "CURRENT_TIMESTAMP(3)" if bind.dialect.name in ("mysql", "mariadb") else "CURRENT_TIMESTAMP"
    )
    if not sa.inspect(bind).has_table("AiAnalysisResult"):
        _results_table(now)
    if sa.inspect(bind).has_table("AiAnalysisJob"):
        return
    op.create_table(
        "AiAnalysisJob",
        sa.Column("id", sa.String(191), primary_key=True),
        sa.Column("userId", sa.String(191), nullable=False),
        sa.Column("sessionId", sa.String(191), nullable=True),
        sa.Column("answerId", sa.String(191), nullable=True),
        sa.Column("jobType", sa.String(32), nullable=False),
        sa.Column("status", sa.String(32), nullable=False, server_default="pending"),
        sa.Column("progress", sa.Integer, nullable=False, server_default="0"),
        sa.Column("errorMessage", sa.Text, nullable=True),
        sa.Column("queuedAt", TS, nullable=True),
        sa.Column("startedAt", TS, nullable=True),
        sa.Column("completedAt", TS, nullable=True),
        sa.Column("createdAt", TS, nullable=False, server_default=sa.text(now)),
        sa.Column("updatedAt", TS, nullable=False),
        sa.Index("AiAnalysisJob_userId_idx", "userId"),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
    )


def _results_table(now: str) -> None:
    op.create_table(
        "AiAnalysisResult",
        sa.Column("id", sa.String(191), primary_key=True),
        sa.Column("jobId", sa.String(191), nullable=False),
        sa.Column("userId", sa.String(191), nullable=False),
        sa.Column("answerId", sa.String(191), nullable=True),
        sa.Column("analysisType", sa.String(32), nullable=False),
        sa.Column("score", sa.Integer, nullable=True),
        sa.Column("result", sa.JSON, nullable=False),
        sa.Column("createdAt", TS, nullable=False, server_default=sa.text(now)),
        sa.Index("AiAnalysisResult_jobId_idx", "jobId"),
        sa.Index("AiAnalysisResult_userId_idx", "userId"),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
    )


def downgrade() -> None:
    # The legacy table holds production data: never dropped.
    pass

"""Baseline: the legacy 13-column AiAnalysisJob table (the system this engine replaces).

Production databases already hold this table with rows; there it is left untouched. On an empty
database it is created exactly as production has it, so that both kinds of database reach the
unified schema through the same expand migration (0002).

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
    if sa.inspect(bind).has_table("AiAnalysisJob"):
        return
    now = (
        "CURRENT_TIMESTAMP(3)" if bind.dialect.name in ("mysql", "mariadb") else "CURRENT_TIMESTAMP"
    )
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


def downgrade() -> None:
    # The legacy table holds production data: never dropped.
    pass

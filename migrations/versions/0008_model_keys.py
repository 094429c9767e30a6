"""Model keys: per-(provider, model, whose key pays) limits and the state that enforces them.

* ``AiAnalysisJob.tokenEstimate``: the tokens a job may spend of its model key's per-minute
  limit (prompt size plus output cap), fixed at create; the key itself is (``modelProvider``,
  ``modelName``, ``credentialMode``), columns the job already has.
* ``AiModelKey``: one row per model key — the limits an operator set (``AdminService.
  PutModelLimit``; NULL takes the settings' default) and the state every replica's dispatch reads
  under a row lock: paused until, the concurrency found by AIMD, and the sliding windows of
  requests and tokens (per-second counts of the last minute, as JSON).

Expand-only, like every migration here.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    existing = {c["name"] for c in inspector.get_columns("AiAnalysisJob")}
    if "tokenEstimate" not in existing:
        op.add_column(
            "AiAnalysisJob",
            sa.Column("tokenEstimate", sa.Integer(), nullable=False, server_default="0"),
        )
    if inspector.has_table("AiModelKey"):
        return
    op.create_table(
        "AiModelKey",
        sa.Column("provider", sa.String(64), primary_key=True),
        sa.Column("model", sa.String(128), primary_key=True),
        sa.Column("credentialScope", sa.String(16), primary_key=True),
        sa.Column("maxConcurrency", sa.Integer()),
        sa.Column("requestsPerMinute", sa.Integer()),
        sa.Column("tokensPerMinute", sa.BigInteger()),
        sa.Column("pausedUntil", TS),
        sa.Column("effectiveConcurrency", sa.Float()),
        sa.Column("requestWindow", sa.Text()),
        sa.Column("tokenWindow", sa.Text()),
        sa.Column("rateLimitedWindow", sa.Text()),
        sa.Column("rateLimitedTotal", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("updatedAt", TS, nullable=False),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )


def downgrade() -> None:
    # Expand-only schema: nothing is dropped.
    pass

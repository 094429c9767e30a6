"""A job's reasoning effort and prompt prefix key (core/warmup.py), the reasoning tokens of each
call in the usage ledger, and the engine's own secrets (``AiEngineSecret``: the key of DeepSeek
``user_id`` pseudonyms when none is configured).

DeepSeek thinks by default; a job type says how much its jobs think (off for the structured
analyses and generators), a create may ask for another effort its type allows, and the lease
carries it. ``reasoningEffort`` NULL (rows written before): off. Expand-only, like every
migration here.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")
COLUMNS = (
    ("AiAnalysisJob", sa.Column("reasoningEffort", sa.String(8), nullable=True)),
    ("AiAnalysisJob", sa.Column("prefixKey", sa.String(32), nullable=True)),
    ("AiAnalysisJob", sa.Column("prefixWarmedAt", TS, nullable=True)),
    ("AiUsageLog", sa.Column("reasoningTokens", sa.Integer(), nullable=False, server_default="0")),
)


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    for table, column in COLUMNS:
        if column.name not in {c["name"] for c in inspector.get_columns(table)}:
            op.add_column(table, column)
    if "AiEngineSecret" not in inspector.get_table_names():
        op.create_table(
            "AiEngineSecret",
            sa.Column("name", sa.String(64), primary_key=True),
            sa.Column("secret", sa.String(128), nullable=False),
            sa.Column("createdAt", TS, nullable=False),
            mysql_charset="utf8mb4",
            mysql_collate="utf8mb4_bin",
        )


def downgrade() -> None:
    # Expand-only schema: nothing is dropped.
    pass

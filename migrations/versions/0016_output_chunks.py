"""Output chunks: the text each attempt's model call writes, stored as it is written,
for ``JobService.StreamOutput`` and for a later attempt to continue from.

Expand-only, like every migration here.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("AiJobOutputChunk"):
        return
    op.create_table(
        "AiJobOutputChunk",
        sa.Column("jobId", sa.String(191), primary_key=True),
        sa.Column("attemptNo", sa.Integer(), primary_key=True),
        sa.Column("startOffset", sa.BigInteger(), primary_key=True),
        sa.Column("endOffset", sa.BigInteger(), nullable=False),
        sa.Column(
            "text", sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb"), nullable=False
        ),
        sa.Column("createdAt", TS, nullable=False),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )


def downgrade() -> None:
    # Expand-only schema: nothing is dropped.
    pass

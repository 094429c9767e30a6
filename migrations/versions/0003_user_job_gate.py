"""Per-user gate row that CreateJob locks while it checks the active-job cap and daily quota.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("AiUserJobGate"):
        return
    op.create_table(
        "AiUserJobGate",
        sa.Column("userId", sa.String(191), primary_key=True),
        sa.Column("updatedAt", TS, nullable=False),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
    )


def downgrade() -> None:
    # Expand-only schema: nothing is dropped.
    pass

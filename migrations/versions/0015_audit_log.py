"""The audit log: every admin action — from the console, the CLI or grpcurl — with who
did it (the token's name), what it named, when, and the outcome. Read with
``AdminService.ListAuditEntries``.

Expand-only, like every migration here.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("AiAuditEntry"):
        return
    op.create_table(
        "AiAuditEntry",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("occurredAt", TS, nullable=False),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Index("idx_AiAuditEntry_occurredAt", "occurredAt"),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )


def downgrade() -> None:
    # Expand-only schema: nothing is dropped.
    pass

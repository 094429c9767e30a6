"""Model routes and circuit breakers (core/routes.py, core/breakers.py): whether a job pinned its
model (``modelPinned``: its route is that model alone), the route tier of each attempt in the
usage ledger, an operator's routes per job type (``AiModelRoute``), and one circuit breaker per
model key (``AiModelBreaker``: provider, model and the user credential, empty for the platform's
key), which every replica's claim reads. Expand-only, like every migration here.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")
COLUMNS = (
    (
        "AiAnalysisJob",
        sa.Column("modelPinned", sa.Boolean(), nullable=False, server_default="0"),
    ),
    ("AiUsageLog", sa.Column("modelTier", sa.String(32), nullable=True)),
)
TABLE_ARGS = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"}


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    for table, column in COLUMNS:
        if column.name not in {c["name"] for c in inspector.get_columns(table)}:
            op.add_column(table, column)
    tables = set(inspector.get_table_names())
    if "AiModelRoute" not in tables:
        op.create_table(
            "AiModelRoute",
            sa.Column("jobType", sa.String(64), primary_key=True),
            sa.Column("tiers", sa.Text(), nullable=False),
            sa.Column("updatedAt", TS, nullable=False),
            **TABLE_ARGS,
        )
    if "AiModelBreaker" not in tables:
        op.create_table(
            "AiModelBreaker",
            sa.Column("provider", sa.String(64), primary_key=True),
            sa.Column("model", sa.String(128), primary_key=True),
            sa.Column("credentialId", sa.String(191), primary_key=True),
            sa.Column("state", sa.String(16), nullable=False, server_default="closed"),
            sa.Column("failures", sa.Integer(), nullable=False, server_default="0"),
            sa.Column("since", TS, nullable=True),
            sa.Column("held", sa.Boolean(), nullable=False, server_default="0"),
            sa.Column("openedTotal", sa.BigInteger(), nullable=False, server_default="0"),
            sa.Column("updatedAt", TS, nullable=False),
            **TABLE_ARGS,
        )


def downgrade() -> None:
    # Expand-only schema: nothing is dropped.
    pass

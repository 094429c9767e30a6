"""Job trees: a child's root, and a parent's join policy, parallelism and child counters.

``parentJobId`` and its index exist since 0002; a tree is read through ``rootJobId``.
Expand-only, like every migration here.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

JOB = "AiAnalysisJob"
COLUMNS = (
    sa.Column("rootJobId", sa.String(191), nullable=True),
    sa.Column("treeDepth", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("maxParallel", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("joinPolicy", sa.String(16), nullable=True),
    sa.Column("childrenTotal", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("childrenOpen", sa.Integer(), nullable=False, server_default="0"),
)


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    columns = {c["name"] for c in inspector.get_columns(JOB)}
    for column in COLUMNS:
        if column.name not in columns:
            op.add_column(JOB, column)
    if "idx_rootJobId" not in {i["name"] for i in inspector.get_indexes(JOB)}:
        op.create_index("idx_rootJobId", JOB, ["rootJobId"])


def downgrade() -> None:
    # Expand-only schema: nothing is dropped.
    pass

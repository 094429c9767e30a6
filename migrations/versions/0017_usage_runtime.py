"""The runtime that held each attempt, on its usage row (the console's job timeline).

Expand-only, like every migration here.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    columns = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("AiUsageLog")}
    if "runtimeInstanceId" not in columns:
        op.add_column("AiUsageLog", sa.Column("runtimeInstanceId", sa.String(100), nullable=True))


def downgrade() -> None:
    # Expand-only schema: nothing is dropped.
    pass

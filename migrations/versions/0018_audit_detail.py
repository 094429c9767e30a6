"""What each audited action did: its response (a bulk action's counts), or why it was refused.

Expand-only, like every migration here.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    columns = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("AiAuditEntry")}
    if "detail" not in columns:
        op.add_column("AiAuditEntry", sa.Column("detail", sa.Text(), nullable=True))


def downgrade() -> None:
    # Expand-only schema: nothing is dropped.
    pass

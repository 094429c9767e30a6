"""A job's reasoning effort, and the reasoning tokens of each call in the usage ledger.

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

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

COLUMNS = {
    "AiAnalysisJob": sa.Column("reasoningEffort", sa.String(8), nullable=True),
    "AiUsageLog": sa.Column("reasoningTokens", sa.Integer(), nullable=False, server_default="0"),
}


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    for table, column in COLUMNS.items():
        if column.name not in {c["name"] for c in inspector.get_columns(table)}:
            op.add_column(table, column)


def downgrade() -> None:
    # Expand-only schema: nothing is dropped.
    pass

"""DeepSeek as it bills and limits today.

* ``AiUsageLog.atPeak``: whether the call's attempt started in a peak window, and
  ``AiUsageLog.peakCostMicros``: what its tokens cost at the peak rate (the usage API's
  ``saved_cost_micros`` is their difference, summed).
* ``AiAnalysisJob.costPolicy``: ``immediate`` or ``off_peak`` (a job that waits for the cheap
  hours, unless its deadline cannot wait).
* ``AiModelKey.maxConcurrencyPerUser``: one end user's calls at once on a key (0 or NULL: none).

Expand-only, like every migration here.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

#: (table, column, type, server default or None for nullable)
COLUMNS: list[tuple[str, str, sa.types.TypeEngine[object], str | None]] = [
    ("AiUsageLog", "atPeak", sa.Boolean(), "0"),
    ("AiUsageLog", "peakCostMicros", sa.BigInteger(), None),
    ("AiAnalysisJob", "costPolicy", sa.String(16), "immediate"),
    ("AiModelKey", "maxConcurrencyPerUser", sa.Integer(), None),
]


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    for table, name, type_, default in COLUMNS:
        if name not in {c["name"] for c in inspector.get_columns(table)}:
            op.add_column(
                table,
                sa.Column(name, type_, nullable=default is None, server_default=default),
            )


def downgrade() -> None:
    # Expand-only schema: nothing is dropped.
    pass

"""Latency as congestion, and slow start for keys no operator limited.

* ``AiModelKey.growthThreshold``: below it a key's window doubles per round of successes (slow
  start), above it grows by one per round; each decrease sets it.
* ``AiModelKey.firstTokenWindow``: the fastest time to first token of each of the last minutes
  (JSON ``[[minute, ms], ...]``), the baseline a call's first token is judged against.
* ``AiModelKey.decreasedAt``: the last decrease; calls leased before it judge nothing.
* ``AiUsageLog.firstTokenMs``: each call's time to first token, as its runtime measured it.

Expand-only, like every migration here: every new column is nullable.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")

COLUMNS: dict[str, list[tuple[str, sa.types.TypeEngine[object]]]] = {
    "AiModelKey": [
        ("growthThreshold", sa.Float()),
        ("firstTokenWindow", sa.Text()),
        ("decreasedAt", TS),
    ],
    "AiUsageLog": [("firstTokenMs", sa.Integer())],
}


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    for table, columns in COLUMNS.items():
        existing = {c["name"] for c in inspector.get_columns(table)}
        for name, type_ in columns:
            if name not in existing:
                op.add_column(table, sa.Column(name, type_, nullable=True))


def downgrade() -> None:
    # Expand-only schema: nothing is dropped.
    pass

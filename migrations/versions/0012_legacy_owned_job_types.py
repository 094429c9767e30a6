"""Job types System A still owns (ADR-002 §3 to §6, the design's coexistence).

``AiLegacyJobType`` lists the job types whose rows belong to the legacy system (the iOS producer
and the old ``AiAnalysisWorker``) until an operator moves them over: the engine reads such rows
but never claims, reaps, retries, fails or counts them. It is state in the database, so every
replica agrees. Seeded with the two types the design names: ``active-recall`` and
``feynman-evaluation``.

Expand-only, like every migration here.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

TABLE = "AiLegacyJobType"
SEEDED = ("active-recall", "feynman-evaluation")


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table(TABLE):
        return
    table = op.create_table(
        TABLE,
        sa.Column("jobType", sa.String(64), primary_key=True),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )
    op.bulk_insert(table, [{"jobType": job_type} for job_type in SEEDED])


def downgrade() -> None:
    # Expand-only schema: nothing is dropped.
    pass

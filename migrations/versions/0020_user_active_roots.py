"""A user's active count reads its index alone: ``parentJobId`` joins ``userId`` and
``lifecycleStatus`` in the per-user index.

CreateJob counts a user's active jobs under their gate lock, and a tree counts once, as its root
(``parentJobId IS NULL``). With the index on (userId, lifecycleStatus) only, that count reads
every active row of the user, children included, to look at its parent. The wider index answers
it from the index; it serves every query the narrower one did (its prefix), which it replaces,
so a status change still writes one per-user index entry.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

JOB = "AiAnalysisJob"
WIDE = "idx_userId_lifecycleStatus_parentJobId"
NARROW = "idx_userId_lifecycleStatus"


def upgrade() -> None:
    existing = {i["name"] for i in sa.inspect(op.get_bind()).get_indexes(JOB)}
    if WIDE not in existing:
        op.create_index(WIDE, JOB, ["userId", "lifecycleStatus", "parentJobId"])
    if NARROW in existing:
        op.drop_index(NARROW, table_name=JOB)


def downgrade() -> None:
    existing = {i["name"] for i in sa.inspect(op.get_bind()).get_indexes(JOB)}
    if NARROW not in existing:
        op.create_index(NARROW, JOB, ["userId", "lifecycleStatus"])
    if WIDE in existing:
        op.drop_index(WIDE, table_name=JOB)

"""Indexes for per-user limits and the schedule-to-start deadline scan.

CreateJob counts a user's active jobs and the jobs they created today under their gate lock; with
only ``userId`` indexed both counts read every job the user ever had. The reaper's deadline scan
(queued jobs whose ``deadlineAt`` has passed) read every queued job. Expand-only, like every
migration here.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

INDEXES = {
    "idx_userId_lifecycleStatus": ["userId", "lifecycleStatus"],
    "idx_userId_createdAt": ["userId", "createdAt"],
    "idx_lifecycleStatus_deadlineAt": ["lifecycleStatus", "deadlineAt"],
}


def upgrade() -> None:
    existing = {i["name"] for i in sa.inspect(op.get_bind()).get_indexes("AiAnalysisJob")}
    for name, columns in INDEXES.items():
        if name not in existing:
            op.create_index(name, "AiAnalysisJob", columns)


def downgrade() -> None:
    # Expand-only schema: nothing is dropped.
    pass

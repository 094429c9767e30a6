"""Commit-ordered positions for published outbox events.

The dispatcher gives each event it publishes the next ``publishedSeq`` while holding the lock on
the single ``OutboxSequence`` row, so positions are handed out in the order the publishing
transactions commit. A subscriber that reads ``publishedSeq > last`` therefore never skips an
event that committed late (reliability S13), which ids alone would allow.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    columns = {c["name"] for c in inspector.get_columns("OutboxEvent")}
    if "publishedSeq" not in columns:
        with op.batch_alter_table("OutboxEvent") as batch:
            batch.add_column(sa.Column("publishedSeq", sa.BigInteger, nullable=True))
        op.create_index("uq_OutboxEvent_publishedSeq", "OutboxEvent", ["publishedSeq"], unique=True)
    if not inspector.has_table("OutboxSequence"):
        op.create_table(
            "OutboxSequence",
            sa.Column("name", sa.String(32), primary_key=True),
            sa.Column("value", sa.BigInteger, nullable=False, server_default="0"),
            mysql_charset="utf8mb4",
            mysql_collate="utf8mb4_unicode_ci",
        )
        op.execute("INSERT INTO OutboxSequence (name, value) VALUES ('published', 0)")


def downgrade() -> None:
    # Expand-only schema: nothing is dropped.
    pass

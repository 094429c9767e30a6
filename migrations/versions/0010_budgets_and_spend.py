"""Budgets and what was spent against them.

* ``AiAnalysisJob.maxOutputTokens``: the answer's token cap from the job's definition, fixed at
  create: the lease carries it, the runtime sends it as ``max_tokens`` and measures progress by it
  (0: rows from before, no cap sent).
* ``AiAnalysisJob.traceParent``: the W3C ``traceparent`` of the CreateJob span (in the caller's
  trace), which the lease carries so that the runtime's spans join that trace.
* ``AiUsageLog.cachedPromptTokens``: prompt tokens the provider served from its context cache
  (priced lower); ``AiUsageLog.modelProvider`` now holds the job's provider.
* ``AiUserBudget``: a user's daily budget set by an operator (``AdminService.PutUserBudget``):
  tokens and cost in micro-units; NULL takes the settings' default, 0 is no limit.
* ``AiUserSpend``: what each user spent per UTC day, added in the transaction that writes the
  ledger row, so that CreateJob and dispatch read one row instead of summing the ledger.
* ``AiModelKey.dailyCostMicros`` (a platform-wide cap per model key), with ``costDay`` and
  ``costToday``: what the key spent on that UTC day.

Expand-only, like every migration here.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")

#: (table, column, type, server default or None for nullable)
COLUMNS: list[tuple[str, str, sa.types.TypeEngine[object], str | None]] = [
    ("AiAnalysisJob", "maxOutputTokens", sa.Integer(), "0"),
    ("AiAnalysisJob", "traceParent", sa.String(55), None),
    ("AiUsageLog", "cachedPromptTokens", sa.Integer(), "0"),
    ("AiModelKey", "dailyCostMicros", sa.BigInteger(), None),
    ("AiModelKey", "costDay", TS, None),
    ("AiModelKey", "costToday", sa.BigInteger(), "0"),
]


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    for table, name, type_, default in COLUMNS:
        if name not in {c["name"] for c in inspector.get_columns(table)}:
            op.add_column(
                table,
                sa.Column(name, type_, nullable=default is None, server_default=default),
            )
    if not inspector.has_table("AiUserBudget"):
        op.create_table(
            "AiUserBudget",
            sa.Column("userId", sa.String(191), primary_key=True),
            sa.Column("dailyTokens", sa.BigInteger()),
            sa.Column("dailyCostMicros", sa.BigInteger()),
            sa.Column("updatedAt", TS, nullable=False),
            mysql_charset="utf8mb4",
            mysql_collate="utf8mb4_bin",
        )
    if not inspector.has_table("AiUserSpend"):
        op.create_table(
            "AiUserSpend",
            sa.Column("userId", sa.String(191), primary_key=True),
            sa.Column("day", TS, primary_key=True),
            sa.Column("tokens", sa.BigInteger(), nullable=False, server_default="0"),
            sa.Column("costMicros", sa.BigInteger(), nullable=False, server_default="0"),
            mysql_charset="utf8mb4",
            mysql_collate="utf8mb4_bin",
        )


def downgrade() -> None:
    # Expand-only schema: nothing is dropped.
    pass

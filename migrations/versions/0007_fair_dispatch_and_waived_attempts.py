"""Waived attempts and fair dispatch.

* ``AiAnalysisJob.waivedAttempts``: attempts that went back to the queue without being spent (a
  provider's 429, a runtime shutting down). The attempt number still grows, so fencing holds; what
  counts against ``maxAttempts`` is ``attemptCount - waivedAttempts``.
* ``AiAnalysisJob.fairSeq`` and ``AiUserJobGate.fairSeq``: each job's place in its user's turn.
  Within a priority the claim orders by ``fairSeq``, so users are served in turn (start-time fair
  queueing); ``idx_fair_dispatch`` keeps the claim one indexed statement.

Expand-only, like every migration here: existing rows get 0 (served first, as before).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

#: (name, type, server default); no default means nullable (a gate's user has no place yet).
COLUMNS: dict[str, list[tuple[str, sa.types.TypeEngine[int], str | None]]] = {
    "AiAnalysisJob": [
        ("waivedAttempts", sa.Integer(), "0"),
        ("fairSeq", sa.BigInteger(), "0"),
    ],
    "AiUserJobGate": [("fairSeq", sa.BigInteger(), None)],
}
INDEX = ("idx_fair_dispatch", ["lifecycleStatus", "priority", "fairSeq", "createdAt", "id"])


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    for table, columns in COLUMNS.items():
        existing = {c["name"] for c in inspector.get_columns(table)}
        for name, type_, default in columns:
            if name not in existing:
                op.add_column(
                    table,
                    sa.Column(name, type_, nullable=default is None, server_default=default),
                )
    name, columns = INDEX
    if name not in {i["name"] for i in inspector.get_indexes("AiAnalysisJob")}:
        op.create_index(name, "AiAnalysisJob", columns)


def downgrade() -> None:
    # Expand-only schema: nothing is dropped.
    pass

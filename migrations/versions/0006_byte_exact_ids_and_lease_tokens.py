"""Byte-exact identifiers, server-issued lease tokens, and room for the largest checkpoint.

Identifiers (``userId``, ``idempotencyKey``, job ids, ``jobType``, ``lockedBy``, credential ids...)
compared under ``utf8mb4_unicode_ci``, so ``ALICE`` and ``alice`` — and accent or width variants —
were one user to ListJobs, CancelJob, the per-user caps and idempotency, while GetJob (comparing
in Python) said NOT_FOUND. Every table of the engine moves to ``utf8mb4_bin``: a binary collation
cannot merge two rows that were distinct before, so the legacy rows convert as they are. The
tables reference each other (``jobId`` -> ``AiAnalysisJob.id``), and a foreign key needs both
columns in one collation, so their keys are dropped, the tables converted, and the keys put back
as they were.
``utf8mb4_bin`` ignores trailing spaces (PAD SPACE, on MariaDB and MySQL alike); identifiers with
spaces are refused at the edge instead (scheduler_service/core/validation.py).

``leaseTokenHash`` holds the SHA-256 of the lease's token; the token itself is never stored.
``checkpoint`` becomes MEDIUMBLOB: BLOB holds 65,535 bytes, one less than the documented 64 KiB.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

JOB = "AiAnalysisJob"
TABLES = (
    JOB,
    "AiJobSnapshot",
    "AiJobArtifact",
    "OutboxEvent",
    "OutboxSequence",
    "AiUsageLog",
    "UserModelCredential",
    "AiLearningAnalysis",
    "WeakPointCandidate",
    "NextActionRecommendation",
    "QuizQuestion",
    "Flashcard",
    "AiUserJobGate",
)
BINARY_COLLATION = "utf8mb4_bin"


def upgrade() -> None:
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    if "leaseTokenHash" not in {c["name"] for c in inspector.get_columns(JOB)}:
        with op.batch_alter_table(JOB) as batch:
            batch.add_column(sa.Column("leaseTokenHash", sa.String(64), nullable=True))
    if bind.dialect.name not in ("mysql", "mariadb"):
        return  # SQLite compares text byte by byte and its BLOB has no size limit.
    op.alter_column(
        JOB, "checkpoint", type_=mysql.MEDIUMBLOB(), existing_type=mysql.BLOB(), nullable=True
    )
    present = [t for t in TABLES if t in set(inspector.get_table_names())]
    # MariaDB refuses to change a column's collation while a foreign key names it, even with
    # the checks off; the keys are dropped and put back as they were around the conversion.
    keys = [(t, fk) for t in present for fk in inspector.get_foreign_keys(t) if fk.get("name")]
    for table, fk in keys:
        op.drop_constraint(fk["name"], table, type_="foreignkey")
    for table in present:
        op.execute(
            f"ALTER TABLE `{table}` CONVERT TO CHARACTER SET utf8mb4 COLLATE {BINARY_COLLATION}"
        )
    for table, fk in keys:
        op.create_foreign_key(
            fk["name"],
            table,
            fk["referred_table"],
            fk["constrained_columns"],
            fk["referred_columns"],
            ondelete=fk.get("options", {}).get("ondelete"),
        )


def downgrade() -> None:
    # Expand-only schema: nothing is dropped.
    pass

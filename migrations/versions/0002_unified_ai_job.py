"""Unified AiJob schema: expand AiAnalysisJob, add the engine's tables (docs/architecture.md,
*Data and migrations*).

Expand-only: columns are added, jobType widened from 32 to 64, two columns renamed with their data
(completedAt -> finishedAt, errorMessage -> internalErrorMessage), lifecycleStatus backfilled from
the legacy status, nothing dropped. MySQL DDL is not transactional, so every step checks whether it
already happened: a run interrupted half-way can simply be run again.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")
BLOB = sa.LargeBinary().with_variant(mysql.BLOB(), "mysql", "mariadb")
ID = sa.String(191)
TABLE_OPTS = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_unicode_ci"}
JOB = "AiAnalysisJob"


# Columns added to the legacy table, in the legacy schema's order, then the engine's own.
def _new_job_columns() -> list[sa.Column[object]]:
    return [
        sa.Column("triggerType", sa.String(32), nullable=False, server_default="api"),
        sa.Column("queueName", sa.String(64), nullable=False, server_default="ai-interactive"),
        sa.Column("targetType", sa.String(32), nullable=True),
        sa.Column("targetId", sa.String(255), nullable=True),
        sa.Column("parentJobId", ID, nullable=True),
        sa.Column("idempotencyKey", sa.String(255), nullable=True),
        sa.Column("retriedFromJobId", sa.String(255), nullable=True),
        sa.Column("lifecycleStatus", sa.String(32), nullable=False, server_default="queued"),
        sa.Column("priority", sa.Integer, nullable=False, server_default="0"),
        sa.Column("lockedBy", sa.String(100), nullable=True),
        sa.Column("lockedAt", TS, nullable=True),
        sa.Column("lockUntil", TS, nullable=True),
        sa.Column("cancelRequestedAt", TS, nullable=True),
        sa.Column("attemptCount", sa.Integer, nullable=False, server_default="0"),
        sa.Column("maxAttempts", sa.Integer, nullable=False, server_default="3"),
        sa.Column("timeoutMs", sa.Integer, nullable=False, server_default="120000"),
        sa.Column("inputRef", sa.String(255), nullable=True),
        sa.Column("inputSchemaVersion", sa.String(100), nullable=True),
        sa.Column("snapshotId", sa.String(255), nullable=True),
        sa.Column("promptKey", sa.String(128), nullable=True),
        sa.Column("promptVersion", sa.String(100), nullable=True),
        sa.Column("outputSchemaVersion", sa.String(100), nullable=True),
        sa.Column("credentialMode", sa.String(32), nullable=False, server_default="platform_key"),
        sa.Column("credentialId", sa.String(255), nullable=True),
        sa.Column("modelTier", sa.String(32), nullable=False, server_default="primary"),
        sa.Column("modelProvider", sa.String(32), nullable=False, server_default="deepseek"),
        sa.Column("modelName", sa.String(64), nullable=False, server_default="deepseek-chat"),
        sa.Column("errorCode", sa.String(100), nullable=True),
        sa.Column("publicErrorMessage", sa.String(500), nullable=True),
        sa.Column("outputHash", sa.String(255), nullable=True),
        sa.Column("validatedOutput", sa.JSON, nullable=True),
        sa.Column("availableAt", TS, nullable=True),
        sa.Column("deadlineAt", TS, nullable=True),
        sa.Column("lastHeartbeatAt", TS, nullable=True),
        sa.Column("checkpoint", BLOB, nullable=True),
        sa.Column("requestHash", sa.String(64), nullable=True),
        sa.Column("resultIdempotencyKey", sa.String(255), nullable=True),
    ]


RENAMES = {"completedAt": ("finishedAt", TS), "errorMessage": ("internalErrorMessage", sa.Text())}

JOB_INDEXES: list[tuple[str, list[str], bool]] = [
    ("idx_userId_jobType_createdAt", ["userId", "jobType", "createdAt"], False),
    ("idx_lifecycleStatus_createdAt", ["lifecycleStatus", "createdAt"], False),
    (
        "idx_queueName_lifecycleStatus_createdAt",
        ["queueName", "lifecycleStatus", "createdAt"],
        False,
    ),
    ("idx_targetType_targetId", ["targetType", "targetId"], False),
    ("idx_parentJobId", ["parentJobId"], False),
    ("idx_userId_jobType_idempotencyKey", ["userId", "jobType", "idempotencyKey"], True),
    ("idx_dispatch", ["lifecycleStatus", "priority", "createdAt", "id"], False),
    ("idx_lifecycleStatus_lockUntil", ["lifecycleStatus", "lockUntil"], False),
    ("uq_resultIdempotencyKey", ["resultIdempotencyKey"], True),
]

# The design's reverse map (legacy status -> lifecycleStatus); anything unknown is taken as failed
# rather than queued, so a row nobody understands is never dispatched.
BACKFILL = """
UPDATE AiAnalysisJob SET
  lifecycleStatus = CASE status
    WHEN 'pending' THEN 'queued'
    WHEN 'processing' THEN 'running'
    WHEN 'completed' THEN 'succeeded'
    WHEN 'failed' THEN 'failed'
    WHEN 'cancelled' THEN 'cancelled'
    WHEN 'cancel_requested' THEN 'cancelled'
    ELSE 'failed'
  END,
  availableAt = COALESCE(availableAt, queuedAt, createdAt)
"""


def _is_mysql() -> bool:
    return op.get_bind().dialect.name in ("mysql", "mariadb")


def _now() -> sa.TextClause:
    return sa.text("CURRENT_TIMESTAMP(3)" if _is_mysql() else "CURRENT_TIMESTAMP")


def upgrade() -> None:
    _expand_job_table()
    _create_engine_tables()
    _create_output_tables()


def _expand_job_table() -> None:
    inspector = sa.inspect(op.get_bind())
    existing = {c["name"] for c in inspector.get_columns(JOB)}
    added_lifecycle = "lifecycleStatus" not in existing
    fks = {fk["name"] for fk in inspector.get_foreign_keys(JOB)}
    with op.batch_alter_table(JOB) as batch:
        for old, (new, type_) in RENAMES.items():
            if old in existing and new not in existing:
                batch.alter_column(
                    old, new_column_name=new, existing_type=type_, existing_nullable=True
                )
        batch.alter_column(
            "jobType", type_=sa.String(64), existing_type=sa.String(32), existing_nullable=False
        )
        for column in _new_job_columns():
            if column.name not in existing:
                batch.add_column(column)
        if "fk_AiAnalysisJob_parentJobId" not in fks:
            batch.create_foreign_key(
                "fk_AiAnalysisJob_parentJobId", JOB, ["parentJobId"], ["id"], ondelete="SET NULL"
            )
    if added_lifecycle:
        op.execute(BACKFILL)
    present = {ix["name"] for ix in sa.inspect(op.get_bind()).get_indexes(JOB)}
    for name, columns, unique in JOB_INDEXES:
        if name not in present:
            op.create_index(name, JOB, columns, unique=unique)


def _job_fk(name: str, ondelete: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(["jobId"], [f"{JOB}.id"], name=name, ondelete=ondelete)


def _create(name: str, *items: sa.SchemaItem) -> None:
    if not sa.inspect(op.get_bind()).has_table(name):
        op.create_table(name, *items, **TABLE_OPTS)


def _create_engine_tables() -> None:
    _create(
        "AiJobSnapshot",
        sa.Column("id", ID, primary_key=True),
        sa.Column("jobId", ID, nullable=False),
        sa.Column("schemaVersion", sa.String(100), nullable=True),
        sa.Column("content", sa.JSON, nullable=False),
        sa.Column("params", sa.JSON, nullable=True),
        sa.Column("redactionVersion", sa.String(32), nullable=True),
        sa.Column("expiresAt", TS, nullable=True),
        sa.Column("createdAt", TS, nullable=False, server_default=_now()),
        _job_fk("fk_AiJobSnapshot_jobId", "CASCADE"),
        sa.Index("idx_AiJobSnapshot_jobId", "jobId"),
    )
    _create(
        "AiJobArtifact",
        sa.Column("id", ID, primary_key=True),
        sa.Column("jobId", ID, nullable=False),
        sa.Column("attemptNo", sa.Integer, nullable=False),
        sa.Column("artifactType", sa.String(64), nullable=False),
        sa.Column("artifactId", ID, nullable=False),
        sa.Column("ordinal", sa.Integer, nullable=False, server_default="0"),
        sa.Column("createdAt", TS, nullable=False, server_default=_now()),
        _job_fk("fk_AiJobArtifact_jobId", "CASCADE"),
        sa.UniqueConstraint(
            "jobId", "artifactType", "artifactId", name="uq_AiJobArtifact_job_type_id"
        ),
    )
    _create(
        "OutboxEvent",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer, "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("eventType", sa.String(64), nullable=False),
        sa.Column("aggregateType", sa.String(64), nullable=False),
        sa.Column("aggregateId", ID, nullable=False),
        sa.Column("dedupeKey", sa.String(255), nullable=False),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False, server_default="pending"),
        sa.Column("attemptCount", sa.Integer, nullable=False, server_default="0"),
        sa.Column("availableAt", TS, nullable=False),
        sa.Column("lockedBy", sa.String(100), nullable=True),
        sa.Column("lockedAt", TS, nullable=True),
        sa.Column("publishedAt", TS, nullable=True),
        sa.Column("lastError", sa.String(500), nullable=True),
        sa.Column("createdAt", TS, nullable=False, server_default=_now()),
        sa.UniqueConstraint("dedupeKey", name="uq_OutboxEvent_dedupeKey"),
        sa.Index("idx_OutboxEvent_status_availableAt", "status", "availableAt", "id"),
        sa.Index("idx_OutboxEvent_aggregate", "aggregateType", "aggregateId"),
    )
    _create(
        "AiUsageLog",
        sa.Column("id", ID, primary_key=True),
        sa.Column("jobId", ID, nullable=True),
        sa.Column("userId", sa.String(191), nullable=True),
        sa.Column("attemptNo", sa.Integer, nullable=False, server_default="0"),
        sa.Column("jobType", sa.String(64), nullable=True),
        sa.Column("credentialMode", sa.String(32), nullable=True),
        sa.Column("modelProvider", sa.String(32), nullable=True),
        sa.Column("model", sa.String(64), nullable=True),
        sa.Column("promptKey", sa.String(128), nullable=True),
        sa.Column("promptVersion", sa.String(100), nullable=True),
        sa.Column("promptTokens", sa.Integer, nullable=False, server_default="0"),
        sa.Column("completionTokens", sa.Integer, nullable=False, server_default="0"),
        sa.Column("totalTokens", sa.Integer, nullable=False, server_default="0"),
        sa.Column("costMicros", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("latencyMs", sa.Integer, nullable=False, server_default="0"),
        sa.Column("errorCode", sa.String(100), nullable=True),
        sa.Column("createdAt", TS, nullable=False, server_default=_now()),
        _job_fk("fk_AiUsageLog_jobId", "SET NULL"),
        sa.Index("idx_AiUsageLog_jobId", "jobId"),
        sa.Index("idx_AiUsageLog_userId_createdAt", "userId", "createdAt"),
    )
    _create(
        "UserModelCredential",
        sa.Column("id", ID, primary_key=True),
        sa.Column("userId", sa.String(191), nullable=False),
        sa.Column("provider", sa.String(32), nullable=False, server_default="deepseek"),
        sa.Column("label", sa.String(100), nullable=True),
        sa.Column("ciphertext", BLOB, nullable=False),
        sa.Column("nonce", BLOB, nullable=False),
        sa.Column("keyVersion", sa.Integer, nullable=False, server_default="1"),
        sa.Column("keyHint", sa.String(8), nullable=True),
        sa.Column("status", sa.String(16), nullable=False, server_default="active"),
        sa.Column("createdAt", TS, nullable=False, server_default=_now()),
        sa.Column("updatedAt", TS, nullable=False, server_default=_now()),
        sa.Column("revokedAt", TS, nullable=True),
        sa.Index("idx_UserModelCredential_userId", "userId"),
    )


def _output_table(name: str, *columns: sa.Column[object]) -> None:
    _create(
        name,
        sa.Column("id", ID, primary_key=True),
        sa.Column("jobId", ID, nullable=False),
        sa.Column("userId", sa.String(191), nullable=False),
        sa.Column("ordinal", sa.Integer, nullable=False, server_default="0"),
        *columns,
        sa.Column("createdAt", TS, nullable=False, server_default=_now()),
        _job_fk(f"fk_{name}_jobId", "CASCADE"),
        sa.UniqueConstraint("jobId", "ordinal", name=f"uq_{name}_jobId_ordinal"),
        sa.Index(f"idx_{name}_userId_createdAt", "userId", "createdAt"),
    )


def _create_output_tables() -> None:
    _output_table(
        "AiLearningAnalysis",
        sa.Column("targetType", sa.String(32), nullable=True),
        sa.Column("targetId", sa.String(255), nullable=True),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("masteryLevel", sa.String(32), nullable=True),
        sa.Column("strengths", sa.JSON, nullable=True),
        sa.Column("weaknesses", sa.JSON, nullable=True),
        sa.Column("details", sa.JSON, nullable=True),
    )
    _output_table(
        "WeakPointCandidate",
        sa.Column("knowledgePointId", sa.String(191), nullable=True),
        sa.Column("title", sa.String(255), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("severity", sa.String(16), nullable=True),
        sa.Column("confidence", sa.Integer, nullable=True),
    )
    _output_table(
        "NextActionRecommendation",
        sa.Column("actionType", sa.String(32), nullable=False),
        sa.Column("title", sa.String(255), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("knowledgePointId", sa.String(191), nullable=True),
        sa.Column("priority", sa.Integer, nullable=False, server_default="0"),
    )
    _output_table(
        "QuizQuestion",
        sa.Column("questionType", sa.String(32), nullable=False),
        sa.Column("stem", sa.Text, nullable=False),
        sa.Column("choices", sa.JSON, nullable=True),
        sa.Column("answer", sa.JSON, nullable=False),
        sa.Column("explanation", sa.Text, nullable=True),
        sa.Column("difficulty", sa.String(16), nullable=True),
        sa.Column("knowledgePointId", sa.String(191), nullable=True),
        sa.Column("status", sa.String(16), nullable=False, server_default="candidate"),
    )
    _output_table(
        "Flashcard",
        sa.Column("front", sa.Text, nullable=False),
        sa.Column("back", sa.Text, nullable=False),
        sa.Column("hint", sa.Text, nullable=True),
        sa.Column("knowledgePointId", sa.String(191), nullable=True),
        sa.Column("status", sa.String(16), nullable=False, server_default="candidate"),
    )


def downgrade() -> None:
    # Expand-only (docs/architecture.md, *Data and migrations*): rolling back is a code rollback;
    # the schema stays.
    pass

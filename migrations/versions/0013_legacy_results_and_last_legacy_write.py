"""Adoption and the contract step (ADR-002 §6, M-AI-04/05/08).

* ``AiAnalysisResult``: the legacy results table, where System A's ``active-recall`` and
  ``feynman-evaluation`` outputs live, and where the engine's projector of those types writes once
  it runs them. Created in its legacy shape where it is absent (an empty database, or one whose
  System A never wrote a result); never changed where it exists. The same definition is in the
  legacy baseline (0001) for databases that start empty.
* ``AiAnalysisJob.legacyWrittenAt``: when legacy code last wrote the row, stamped by the
  shadow-write triggers (rewritten here): an INSERT that sets no ``promptVersion`` (the engine
  always does) or an UPDATE that changes ``status`` and leaves ``lifecycleStatus`` as it was. The
  contract step refuses while a row was written so within its quiet period; the intake of adopted
  types finds legacy inserts through its index. The engine never writes it.

The trigger bodies and maps are written out here, not imported (a migration is history).

Expand-only, like every migration here but the separate contract step.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")
TABLE = "AiAnalysisJob"
RESULTS = "AiAnalysisResult"
COLUMN = "legacyWrittenAt"
INDEX = "idx_legacyWrittenAt"
INSERT_TRIGGER = "trg_AiAnalysisJob_legacy_insert"
UPDATE_TRIGGER = "trg_AiAnalysisJob_legacy_update"

FORWARD = {
    "queued": "pending",
    "running": "processing",
    "succeeded": "completed",
    "failed": "failed",
    "cancelled": "failed",
}
REVERSE = {
    "pending": "queued",
    "processing": "running",
    "completed": "succeeded",
    "failed": "failed",
    "cancelled": "cancelled",
    "cancel_requested": "cancelled",
}


def _case(column: str, mapping: dict[str, str], otherwise: str) -> str:
    arms = " ".join(f"WHEN '{key}' THEN '{value}'" for key, value in mapping.items())
    return f"(CASE {column} {arms} ELSE {otherwise} END)"


def _mysql() -> tuple[str, str]:
    status, lifecycle, stamp = "NEW.`status`", "NEW.`lifecycleStatus`", f"NEW.`{COLUMN}`"
    forward = _case(lifecycle, FORWARD, "NULL")
    reverse = _case(status, REVERSE, lifecycle)
    out_of_step = f"{status} IS NOT NULL AND NOT ({status} <=> {forward})"
    # The stamp is assigned first: the condition reads lifecycleStatus before it is moved.
    insert = (
        f"CREATE TRIGGER `{INSERT_TRIGGER}` BEFORE INSERT ON `{TABLE}` FOR EACH ROW "
        f"SET {stamp} = IF(NEW.`promptVersion` IS NULL, UTC_TIMESTAMP(3), {stamp}), "
        f"{lifecycle} = IF({out_of_step}, {reverse}, {lifecycle})"
    )
    legacy = f"NOT ({status} <=> OLD.`status`) AND {lifecycle} <=> OLD.`lifecycleStatus`"
    update = (
        f"CREATE TRIGGER `{UPDATE_TRIGGER}` BEFORE UPDATE ON `{TABLE}` FOR EACH ROW "
        f"SET {stamp} = IF({legacy}, UTC_TIMESTAMP(3), {stamp}), "
        f"{lifecycle} = IF({legacy} AND {out_of_step}, {reverse}, {lifecycle})"
    )
    return insert, update


def _sqlite() -> tuple[str, str]:
    now = "(strftime('%Y-%m-%d %H:%M:%f', 'now') || '000')"
    forward = _case("NEW.lifecycleStatus", FORWARD, "NULL")
    reverse = _case("NEW.status", REVERSE, "NEW.lifecycleStatus")
    out_of_step = f"NEW.status IS NOT NULL AND NEW.status IS NOT {forward}"
    moved = f"CASE WHEN {out_of_step} THEN {reverse} ELSE NEW.lifecycleStatus END"
    insert = (
        f"CREATE TRIGGER {INSERT_TRIGGER} AFTER INSERT ON {TABLE} FOR EACH ROW "
        f"WHEN ({out_of_step}) OR NEW.promptVersion IS NULL BEGIN "
        f"UPDATE {TABLE} SET lifecycleStatus = {moved}, {COLUMN} = CASE WHEN "
        f"NEW.promptVersion IS NULL THEN {now} ELSE {COLUMN} END WHERE id = NEW.id; END"
    )
    update = (
        f"CREATE TRIGGER {UPDATE_TRIGGER} AFTER UPDATE OF status ON {TABLE} FOR EACH ROW "
        f"WHEN NEW.status IS NOT OLD.status AND NEW.lifecycleStatus IS OLD.lifecycleStatus "
        f"BEGIN UPDATE {TABLE} SET lifecycleStatus = {moved}, {COLUMN} = {now} "
        f"WHERE id = NEW.id; END"
    )
    return insert, update


def _create_results_table() -> None:
    now = (
        "CURRENT_TIMESTAMP(3)"
        if op.get_bind().dialect.name in ("mysql", "mariadb")
        else "CURRENT_TIMESTAMP"
    )
    op.create_table(
        RESULTS,
        sa.Column("id", sa.String(191), primary_key=True),
        sa.Column("jobId", sa.String(191), nullable=False),
        sa.Column("userId", sa.String(191), nullable=False),
        sa.Column("answerId", sa.String(191), nullable=True),
        sa.Column("analysisType", sa.String(32), nullable=False),
        sa.Column("score", sa.Integer, nullable=True),
        sa.Column("result", sa.JSON, nullable=False),
        sa.Column("createdAt", TS, nullable=False, server_default=sa.text(now)),
        sa.Index("AiAnalysisResult_jobId_idx", "jobId"),
        sa.Index("AiAnalysisResult_userId_idx", "userId"),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
    )


def upgrade() -> None:
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    if not inspector.has_table(RESULTS):
        _create_results_table()
    if COLUMN not in {c["name"] for c in inspector.get_columns(TABLE)}:
        op.add_column(TABLE, sa.Column(COLUMN, TS, nullable=True))
        op.create_index(INDEX, TABLE, [COLUMN])
    for name in (INSERT_TRIGGER, UPDATE_TRIGGER):
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
    for statement in _sqlite() if bind.dialect.name == "sqlite" else _mysql():
        op.execute(statement)


def downgrade() -> None:
    # Expand-only schema: nothing is dropped (the triggers stay as this revision wrote them).
    pass

"""The two-way shadow write (ADR-002 §4, the design's ``reverseShadowMap``).

The engine writes ``lifecycleStatus`` and the legacy ``status`` in the same statement (queued →
pending, running → processing, succeeded → completed, failed and cancelled → failed). Legacy code
(System A's producer and worker) knows only ``status``. Triggers on ``AiAnalysisJob`` make such a
write move ``lifecycleStatus`` too, by the reverse map (pending → queued, processing → running,
completed → succeeded, failed → failed, cancelled and cancel_requested → cancelled), so that every
writer passes through them and legacy code needs no change.

A write is legacy when the ``status`` it leaves is not what the row's ``lifecycleStatus`` maps to
*and* the write did not set ``lifecycleStatus`` itself (on UPDATE: left it unchanged, and changed
``status``). The engine's writes always leave the two in step, so they never fire the mapping and
nothing bounces back. An unknown legacy status leaves ``lifecycleStatus`` as it is.

MySQL and MariaDB (Galera too): BEFORE triggers that set ``NEW.lifecycleStatus`` in one ``SET``.
SQLite: AFTER triggers that update the row's ``lifecycleStatus`` only (so the ``UPDATE OF status``
trigger cannot fire again); a trigger's own writes do not count in the outer statement's row
count, so the engine's guarded writes still see exactly their own matches.

The maps are written out here, not imported: a migration is history and must not change when the
code does.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

TABLE = "AiAnalysisJob"
INSERT_TRIGGER = "trg_AiAnalysisJob_legacy_insert"
UPDATE_TRIGGER = "trg_AiAnalysisJob_legacy_update"

#: lifecycleStatus -> the legacy status the engine writes with it.
FORWARD = {
    "queued": "pending",
    "running": "processing",
    "succeeded": "completed",
    "failed": "failed",
    "cancelled": "failed",
}
#: A legacy status -> the lifecycleStatus it means.
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


def _mysql(q: str) -> tuple[str, str]:
    """(insert trigger, update trigger) for MySQL/MariaDB; ``q`` quotes identifiers."""
    status, lifecycle = f"NEW.{q}status{q}", f"NEW.{q}lifecycleStatus{q}"
    forward = _case(lifecycle, FORWARD, "NULL")
    reverse = _case(status, REVERSE, lifecycle)
    out_of_step = f"{status} IS NOT NULL AND NOT ({status} <=> {forward})"
    insert = (
        f"CREATE TRIGGER {q}{INSERT_TRIGGER}{q} BEFORE INSERT ON {q}{TABLE}{q} FOR EACH ROW "
        f"SET {lifecycle} = IF({out_of_step}, {reverse}, {lifecycle})"
    )
    legacy_update = (
        f"NOT ({status} <=> OLD.{q}status{q})"
        f" AND {lifecycle} <=> OLD.{q}lifecycleStatus{q} AND {out_of_step}"
    )
    update = (
        f"CREATE TRIGGER {q}{UPDATE_TRIGGER}{q} BEFORE UPDATE ON {q}{TABLE}{q} FOR EACH ROW "
        f"SET {lifecycle} = IF({legacy_update}, {reverse}, {lifecycle})"
    )
    return insert, update


def _sqlite() -> tuple[str, str]:
    forward = _case("NEW.lifecycleStatus", FORWARD, "NULL")
    reverse = _case("NEW.status", REVERSE, "NEW.lifecycleStatus")
    out_of_step = f"NEW.status IS NOT NULL AND NEW.status IS NOT {forward}"
    body = f"BEGIN UPDATE {TABLE} SET lifecycleStatus = {reverse} WHERE id = NEW.id; END"
    insert = (
        f"CREATE TRIGGER {INSERT_TRIGGER} AFTER INSERT ON {TABLE} FOR EACH ROW "
        f"WHEN {out_of_step} {body}"
    )
    update = (
        f"CREATE TRIGGER {UPDATE_TRIGGER} AFTER UPDATE OF status ON {TABLE} FOR EACH ROW "
        f"WHEN NEW.status IS NOT OLD.status AND NEW.lifecycleStatus IS OLD.lifecycleStatus "
        f"AND {out_of_step} {body}"
    )
    return insert, update


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    statements = _sqlite() if dialect == "sqlite" else _mysql("`")
    for statement in statements:
        op.execute(statement)


def downgrade() -> None:
    for name in (INSERT_TRIGGER, UPDATE_TRIGGER):
        op.execute(f"DROP TRIGGER IF EXISTS {name}")

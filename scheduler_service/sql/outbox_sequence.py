"""The published positions' counter: the ``OutboxSequence`` row that numbers published events.

Whoever publishes (the dispatcher's rounds, or a writer publishing as it writes) takes the next
positions under this row's lock and holds it to commit, so positions follow the order in which
publications commit and stay contiguous (docs/architecture.md, *The outbox*).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from sqlalchemy import Table, bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.sql.db.driver import write_later
from scheduler_service.sql.db.models import OutboxSequence

__all__ = ["Positions", "take_positions"]

_sequence = cast(Table, OutboxSequence.__table__)
#: The name of the ``OutboxSequence`` row that hands out published positions.
_PUBLISHED_SEQUENCE = "published"

# Built once: statement construction costs more than executing a cached statement.
_LOCK_SEQUENCE = (
    select(_sequence.c.value).where(_sequence.c.name == _PUBLISHED_SEQUENCE).with_for_update()
)
_ADVANCE_SEQUENCE = (
    update(_sequence)
    .where(_sequence.c.name == _PUBLISHED_SEQUENCE)
    .values(value=bindparam("b_value"))
)
#: MySQL's sequence idiom: the row moves on by ``b_count`` under its lock, and the session's
#: ``LAST_INSERT_ID()`` answers the new value until the next such call.
_ADVANCE_BY = (
    update(_sequence)
    .where(_sequence.c.name == _PUBLISHED_SEQUENCE)
    .values(value=func.last_insert_id(_sequence.c.value + bindparam("b_count")))
)


@dataclass(frozen=True, slots=True)
class Positions:
    """``count`` positions just taken, as the statement that uses them next writes them."""

    #: The position before the first one taken; None on MySQL, where the positions are
    #: ``LAST_INSERT_ID() - count + 1`` … ``LAST_INSERT_ID()`` on the server.
    before: int | None
    count: int

    @property
    def on_server(self) -> bool:
        """Each value is an offset to add to ``LAST_INSERT_ID()`` in the statement."""
        return self.before is None

    def value(self, index: int) -> int:
        """What the statement writes for the ``index``-th position (from 0)."""
        if self.before is None:
            return index + 1 - self.count
        return self.before + index + 1


async def take_positions(conn: AsyncConnection, count: int) -> Positions:
    """Lock the counter, held to commit, and move it on by ``count``. On MySQL the move is
    queued to go with the statement that uses the positions: no read in between."""
    if conn.dialect.name == "mysql":
        await write_later(
            conn, _ADVANCE_BY, {"b_count": count}, expect=1, what="the outbox sequence"
        )
        return Positions(None, count)
    current: int = (await conn.execute(_LOCK_SEQUENCE)).scalar_one()
    await write_later(conn, _ADVANCE_SEQUENCE, {"b_value": current + count})
    return Positions(current, count)

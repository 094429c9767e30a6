"""The published positions' counter: the ``OutboxSequence`` row that numbers published events.

Whoever publishes (the dispatcher's rounds, or a writer publishing as it writes) takes the next
positions under this row's lock and holds it to commit, so positions follow the order in which
publications commit and stay contiguous (docs/architecture.md, *The outbox*).
"""

from __future__ import annotations

from typing import cast

from sqlalchemy import Table, bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.db.driver import write_later
from scheduler_service.db.models import OutboxSequence

__all__ = ["take_positions"]

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


async def take_positions(conn: AsyncConnection, count: int) -> int | None:
    """Lock the counter and move it on by ``count``. Returns the position before the first
    one taken; None on MySQL, where the positions are ``LAST_INSERT_ID() - count + 1`` …
    ``LAST_INSERT_ID()`` on the server, for the statement that uses them next in this session
    (the move is queued to go with it: no read in between)."""
    if conn.dialect.name == "mysql":
        await write_later(
            conn, _ADVANCE_BY, {"b_count": count}, expect=1, what="the outbox sequence"
        )
        return None
    current: int = (await conn.execute(_LOCK_SEQUENCE)).scalar_one()
    await write_later(conn, _ADVANCE_SEQUENCE, {"b_value": current + count})
    return current

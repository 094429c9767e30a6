"""The users' gate rows on SQL (``AiUserJobGate``): creates of one user serialise on theirs, and
each holds its user's newest fair-dispatch place."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, cast

from sqlalchemy import ScalarSelect, Table, bindparam, delete, select
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduler_service.core import fairness
from scheduler_service.core.records import NewJob
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.ports import GateStore
from scheduler_service.sql import job_queries as queries
from scheduler_service.sql import job_statements as sql
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.hints import by_dispatch_index
from scheduler_service.sql.db.idempotent import insert_ignoring_duplicates
from scheduler_service.sql.db.models import AiUserJobGate
from scheduler_service.sql.db.multirow import insert_rows

__all__ = ["SqlGateStore"]

_gate = cast(Table, AiUserJobGate.__table__)
#: Fair dispatch: the users' last places, the queue's head and the newest running place.
_GATE_PLACES = select(_gate.c.userId, _gate.c.fairSeq).where(
    _gate.c.userId.in_(bindparam("b_users", expanding=True))
)


def _place_at_end(status: LifecycleStatus, *, last: bool) -> ScalarSelect[Any]:
    """The first (or ``last``) fair-dispatch place of the engine's rows in ``status`` at the
    priority ``b_priority``: the dispatch index's first entry in that range whose row the engine
    owns. Not ``MIN()``/``MAX()``: with the ownership condition, MariaDB reads the whole range for
    an aggregate (every queued job, at each create), where an ordered read stops at the first."""
    jobs = sql.jobs
    place = jobs.c.fairSeq
    return (
        by_dispatch_index(
            select(place)
            .where(
                jobs.c.lifecycleStatus == status.value,
                jobs.c.priority == bindparam("b_priority"),
                sql.engine_owned(),  # The legacy system's rows hold no place in the engine's turns
            )
            .order_by(place.desc() if last else place)
            .limit(1)
        )
    ).scalar_subquery()


_QUEUE_FLOOR = select(
    _place_at_end(LifecycleStatus.QUEUED, last=False),
    _place_at_end(LifecycleStatus.RUNNING, last=True),
)
#: The same for one user at one priority (a single create), with the user's place, in one read.
_ONE_USER_FLOOR = select(
    *_QUEUE_FLOOR.selected_columns,
    select(_gate.c.fairSeq).where(_gate.c.userId == bindparam("b_user")).scalar_subquery(),
)

#: Users' last places and each priority's floor.
_Floors = tuple[dict[str, int], dict[int, fairness.Floor]]


class SqlGateStore(GateStore):
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn
        #: The users whose gates this transaction locked, and their places as read then.
        self._placed: set[str] = set()
        self._places: dict[str, int] = {}

    async def lock_user_gates(self, user_ids: Collection[str]) -> dict[str, tuple[int, int]]:
        # The upsert locks each gate, new or not, in user order (on MySQL/MariaDB
        # ON DUPLICATE KEY UPDATE takes an exclusive lock on the existing row; SQLite holds the
        # whole database from the first write): one statement instead of an insert and a
        # SELECT … FOR UPDATE, and a prune cannot delete a gate between the two.
        users = sorted(set(user_ids))
        rows = [{"userId": user} for user in users]
        await insert_ignoring_duplicates(self._conn, _gate, rows, stamped=("updatedAt",))
        counts, places = await queries.active_today_and_places_of(self._conn, users)
        # The places cannot move before this transaction ends (the gates are locked): the
        # create's fair_places takes them from here instead of reading them again.
        self._places.update(places)
        self._placed |= set(users)
        return counts

    async def _one_user_floor(self, user: str, priority: int) -> _Floors:
        row = (
            await self._conn.execute(_ONE_USER_FLOOR, {"b_priority": priority, "b_user": user})
        ).one()
        head, running, last = row[0], row[1], row[2]
        lasts = {} if last is None else {user: int(last)}
        return lasts, {priority: fairness.Floor(head, running)}

    async def _floors(self, users: list[str], priorities: list[int]) -> _Floors:
        if self._placed.issuperset(users):
            lasts = {u: self._places[u] for u in users if u in self._places}
        else:
            rows = (await self._conn.execute(_GATE_PLACES, {"b_users": users})).all()
            lasts = {row.userId: int(row.fairSeq) for row in rows if row.fairSeq is not None}
        floors = {}
        for priority in priorities:
            head, running = (await self._conn.execute(_QUEUE_FLOOR, {"b_priority": priority})).one()
            floors[priority] = fairness.Floor(head, running)
        return lasts, floors

    async def fair_places(self, jobs: Sequence[NewJob]) -> list[int]:
        """Each new job's place in its user's turn (:mod:`~scheduler_service.core.fairness`),
        moving the users' gates on to their newest place."""
        users = sorted({job.user_id for job in jobs})
        priorities = sorted({job.priority for job in jobs})
        lasts, floors = await (
            self._one_user_floor(users[0], priorities[0])
            if len(users) == len(priorities) == 1
            else self._floors(users, priorities)
        )
        placed, latest = fairness.places([(j.user_id, j.priority) for j in jobs], lasts, floors)
        self._places.update(latest)
        # One upsert moves every user's gate on (a statement per user cost a round trip each);
        # creates that skip the limits have no gate row yet, and get one to hold the place. In
        # user order, as lock_user_gates takes them.
        places = [{"userId": user, "fairSeq": latest[user]} for user in sorted(latest)]
        await insert_rows(self._conn, _gate, places, stamped=("updatedAt",), replace=("fairSeq",))
        return placed

    async def prune_user_gates(self, idle_ms: int, *, limit: int = 500) -> int:
        old = _gate.c.updatedAt < db_now(-bindparam("b_idle_ms"))
        found = await self._conn.execute(
            select(_gate.c.userId).where(old).limit(limit), {"b_idle_ms": idle_ms}
        )
        users = list(found.scalars())
        if not users:
            return 0
        result = await self._conn.execute(
            delete(_gate).where(_gate.c.userId.in_(users), old), {"b_idle_ms": idle_ms}
        )
        return int(result.rowcount)

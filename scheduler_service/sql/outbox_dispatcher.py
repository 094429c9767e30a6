"""The outbox dispatcher: claim, deliver, then publish — safe on every replica
(docs/architecture.md, *The outbox*).

One round, where a sink may be slow or fail (an external one):

1. Events stuck in ``processing`` longer than the processing timeout (their claimer died) go back
   to ``pending``. A crash is not a delivery failure, so ``attemptCount`` is left alone (S10).
2. Claim a small batch of ``pending`` events whose ``availableAt`` has passed: ``SELECT … FOR
   UPDATE SKIP LOCKED`` on the status index, then a guarded UPDATE to ``processing`` with
   ``lockedBy``/``lockedAt``. Never deliver first and claim afterwards.
3. Deliver each event to the sinks (waking dispatch for ``ai.job.enqueue``, and whatever else is
   plugged in). A failure adds one to ``attemptCount`` and returns the event to ``pending`` with
   backoff; the third failure makes it ``dead`` (kept, counted, re-driven by an admin).
4. Publish the delivered events: under the lock of the ``OutboxSequence`` row, each gets the next
   ``publishedSeq`` and becomes ``published``. Subscribers read the log in that order.

Where every sink is *immediate* (in-process and at once, such as the wake-up of this replica's
lease dispatch, the only sink today), steps 2 to 4 are one transaction instead of two: the pending
events are locked (``FOR UPDATE SKIP LOCKED``, the claim), delivered, and published or given back
with their failure, then committed. A round that does not commit leaves its events pending, to
be delivered again (at least once, as before), and there is no ``processing`` state to time out.
Each event is written once on its way out instead of twice, and a round is one commit instead of
two: what a Galera cluster has to certify and apply on every node.

Unknown event types are logged as a warning and published without delivery.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, cast

from sqlalchemy import BindParameter, Integer, Table, Update, bindparam, case, func, select, update

from scheduler_service.core.events import EventType, OutboxStatus
from scheduler_service.services.loops import RoundLoop
from scheduler_service.sql.db.clock import db_now
from scheduler_service.sql.db.driver import write_later
from scheduler_service.sql.db.models import OutboxEvent
from scheduler_service.sql.db.multirow import batch_bucket
from scheduler_service.sql.outbox_sequence import take_positions
from scheduler_service.sql.uow import SqlTransaction, SqlUnitOfWork

__all__ = ["ClaimedEvent", "EventSink", "OutboxDispatcher", "undelivered_types"]

log = logging.getLogger(__name__)

#: Longest wait between timer rounds once the outbox has found nothing for a while.
IDLE_MAX_S = 2.0

_outbox = cast(Table, OutboxEvent.__table__)
_o = _outbox.c
KNOWN_TYPES = frozenset(t.value for t in EventType)
MAX_ATTEMPTS = 3
_PENDING = OutboxStatus.PENDING.value
_PROCESSING = OutboxStatus.PROCESSING.value


@dataclass(frozen=True, slots=True)
class ClaimedEvent:
    id: int
    event_type: str
    aggregate_id: str
    payload: dict[str, Any]
    attempt_count: int
    created_at: datetime


class EventSink(Protocol):
    """Where delivered events go. Raising means "not delivered": the event is retried.

    ``immediate``: the sink delivers in-process and at once, and delivering an event again after
    a round that did not commit does no harm; with only such sinks, a round delivers and
    publishes in one transaction."""

    immediate: bool
    #: The event types it takes (None: every type). An event of a type no sink takes has
    #: nothing to be delivered: its writer publishes it (sql/outbox_writer.py).
    event_types: frozenset[EventType] | None

    async def deliver(self, event: ClaimedEvent) -> None: ...


def undelivered_types(sinks: Sequence[EventSink]) -> frozenset[EventType]:
    """The event types no sink in ``sinks`` takes."""
    return frozenset(
        t for t in EventType if not any(s.event_types is None or t in s.event_types for s in sinks)
    )


class OutboxDispatcher(RoundLoop):
    def __init__(
        self,
        uow: SqlUnitOfWork,
        sinks: Sequence[EventSink],
        *,
        instance_id: str,
        interval_s: float = 0.2,
        batch: int = 100,
        processing_timeout_s: float = 60.0,
        backoff_base_ms: int = 1_000,
        on_published: Callable[[], None] = lambda: None,
    ) -> None:
        # Idle, it looks every interval at first, then less and less often, up to IDLE_MAX_S:
        # events written here wake it at once, so only other replicas' wait that long.
        super().__init__("outbox", interval_s, idle_max_s=IDLE_MAX_S)
        self._uow = uow
        self._sinks = list(sinks)
        self._instance_id = instance_id[:100]
        self._batch = batch
        self._processing_timeout_ms = round(processing_timeout_s * 1000)
        self._backoff_base_ms = backoff_base_ms
        self._last_stale_check = float("-inf")
        # A claim is stale only after the processing timeout: looking every tenth of it finds
        # one at most a tenth late, with no transaction every half interval under load (which
        # was one in ten of a busy scheduler's). Never more often than twice an interval.
        self._stale_check_every_s = max(interval_s / 2, processing_timeout_s / 10)
        #: The last round found nothing to do and nothing on its way.
        self._idle = False
        self._on_published = on_published
        self._in_one_transaction = all(sink.immediate for sink in self._sinks)

    async def _round(self) -> bool:
        """False when there was nothing to do and nothing is on its way: no event claimed, none
        pending (a retry waiting for its time) or being delivered by anyone. Only then does the
        loop slow down, so a stalled claim or a retry is still seen within an interval."""
        if self._idle and not await self._uow.read(_unsettled):
            return False  # one read per idle round: nothing to claim, nothing stale
        self._idle = False  # a failure below leaves the next round looking for work
        claimed = 0
        while (count := await self.run_once()) == self._batch:
            claimed += count
        self._idle = not (claimed + count or await self._uow.read(_unsettled))
        return not self._idle

    async def run_once(self) -> int:
        """One round; returns how many events it claimed."""
        now = asyncio.get_running_loop().time()
        # Under load, rounds come many times per interval (each create wakes one): stale claims
        # are looked for on a clock of their own, not in every round.
        if now - self._last_stale_check >= self._stale_check_every_s:
            self._last_stale_check = now
            await self.release_stale()
        if self._in_one_transaction:
            return await self.deliver_and_publish()
        claimed = await self.claim()
        if not claimed:
            return 0
        delivered: list[ClaimedEvent] = []
        for event in claimed:
            if await self._deliver(event):
                delivered.append(event)
        if delivered:
            try:
                await self.publish(delivered)
            except Exception:
                # Back to pending now (delivered again, at least once), not after the claim
                # timeout; if even that fails, the stale claim is released later as usual.
                with contextlib.suppress(Exception):
                    await self.release(delivered)
                raise
        return len(claimed)

    # -- steps ------------------------------------------------------------------------------

    async def release(self, events: Sequence[ClaimedEvent]) -> int:
        """Our claims of ``events`` back to pending at once (a publish that could not commit);
        not a delivery failure, so ``attemptCount`` is left alone."""
        statement = (
            update(_outbox)
            .where(
                _o.id.in_([e.id for e in events]),
                _o.status == _PROCESSING,
                _o.lockedBy == self._instance_id,
            )
            .values(status=_PENDING, lockedBy=None, lockedAt=None)
        )

        async def unit(tx: SqlTransaction) -> int:
            return int((await tx.conn.execute(statement)).rowcount)

        return await self._uow.run(unit)

    async def release_stale(self) -> int:
        timeout = {"b_timeout_ms": self._processing_timeout_ms}

        async def unit(tx: SqlTransaction) -> int:
            return int((await tx.conn.execute(_RELEASE_STALE, timeout)).rowcount)

        released = await self._uow.run(unit)
        if released:
            log.warning(
                "outbox events returned from a stalled claim",
                extra={"action": "outbox_release", "count": released},
            )
        return released

    async def claim(self) -> list[ClaimedEvent]:
        async def unit(tx: SqlTransaction) -> list[ClaimedEvent]:
            found = await tx.conn.execute(_SELECT_CLAIMABLE, {"b_limit": self._batch})
            ids = list(found.scalars())
            if not ids:
                return []
            owner = {"b_ids": ids, "b_owner": self._instance_id}
            await tx.conn.execute(_CLAIM, {"b_ids": ids, "lockedBy": self._instance_id})
            rows = await tx.conn.execute(_SELECT_CLAIMED, owner)
            return [ClaimedEvent(*row) for row in rows]

        return await self._uow.run(unit)

    async def _deliver(self, event: ClaimedEvent) -> bool:
        error = await self._delivery_error(event)
        if error is not None:
            await self._failed(event, error)
            return False
        return True

    async def _delivery_error(self, event: ClaimedEvent) -> Exception | None:
        """Deliver ``event`` to every sink: None, or what the first that failed raised."""
        if event.event_type not in KNOWN_TYPES:
            log.warning(
                "unknown outbox event type: published without delivery",
                extra={
                    "action": "outbox_unknown_type",
                    "eventId": event.id,
                    "eventType": event.event_type,
                },
            )
            return None
        try:
            for sink in self._sinks:
                await sink.deliver(event)
        except Exception as exc:
            return exc
        return None

    async def _failed(self, event: ClaimedEvent, exc: Exception) -> None:
        statement = self._failure(event, exc).where(
            _o.status == _PROCESSING, _o.lockedBy == self._instance_id
        )

        async def unit(tx: SqlTransaction) -> None:
            await tx.conn.execute(statement)

        await self._uow.run(unit)
        _log_failure(event)

    def _failure(self, event: ClaimedEvent, exc: Exception) -> Update:
        """``event`` back to pending with backoff after a failed delivery, or dead after its
        last attempt (the caller adds the guard of its claim)."""
        attempts = event.attempt_count + 1
        dead = attempts >= MAX_ATTEMPTS
        values: dict[str, Any] = {
            "attemptCount": attempts,
            "status": OutboxStatus.DEAD.value if dead else _PENDING,
            "lockedBy": None,
            "lockedAt": None,
            "lastError": f"{type(exc).__name__}: {exc}"[:500],
        }
        if not dead:
            values["availableAt"] = db_now(self._backoff_base_ms * 2 ** (attempts - 1))
        return update(_outbox).where(_o.id == event.id).values(values)

    async def deliver_and_publish(self) -> int:
        """Claim, deliver and publish one batch in one transaction (immediate sinks only);
        returns how many events it took."""
        failed: list[ClaimedEvent] = []
        published: list[int] = []

        async def unit(tx: SqlTransaction) -> int:
            failed.clear()
            published.clear()
            found = await tx.conn.execute(_SELECT_PENDING, {"b_limit": self._batch})
            events = [ClaimedEvent(*row) for row in found]
            if not events:
                return 0
            for event in events:
                error = await self._delivery_error(event)
                if error is None:
                    published.append(event.id)
                else:
                    failed.append(event)
                    # Locked by this transaction since the SELECT: still pending.
                    failure = self._failure(event, error).where(_o.status == _PENDING)
                    if (await tx.conn.execute(failure)).rowcount != 1:
                        raise RuntimeError(f"outbox event {event.id} changed under its lock")
            if published:
                published.sort()
                await _publish_locked(tx, published, owner=None)
            return len(events)

        count = await self._uow.run(unit)
        for event in failed:
            _log_failure(event)
        if published:
            self._on_published()
        return count

    async def publish(self, events: Sequence[ClaimedEvent]) -> int:
        """Mark delivered events published with commit-ordered positions; returns how many."""

        async def unit(tx: SqlTransaction) -> int:
            # A claim released as stale and taken by another replica is theirs now: only the
            # events still ours get positions.
            ours = list(
                (
                    await tx.conn.execute(
                        _SELECT_STILL_OURS,
                        {"b_ids": [e.id for e in events], "b_owner": self._instance_id},
                    )
                ).scalars()
            )
            if ours:
                await _publish_locked(tx, ours, owner=self._instance_id)
            return len(ours)

        count = await self._uow.run(unit)
        if count:
            self._on_published()
        return count


def _log_failure(event: ClaimedEvent) -> None:
    attempts = event.attempt_count + 1
    log.warning(
        "outbox delivery failed",
        extra={
            "action": "outbox_failed",
            "eventId": event.id,
            "attempt": attempts,
            "dead": attempts >= MAX_ATTEMPTS,
        },
    )


async def _publish_locked(tx: SqlTransaction, ids: Sequence[int], owner: str | None) -> None:
    """Publish ``ids`` (in id order, rows this transaction has locked: claimed by ``owner``, or
    still pending when ``owner`` is None) at the next positions, contiguous, in one UPDATE
    (sql/outbox_sequence.py holds the counter's lock to commit)."""
    params: dict[str, Any] = {"b_owner": owner} if owner is not None else {}
    size = batch_bucket(len(ids))
    positions = await take_positions(tx.conn, len(ids))
    for k in range(size):
        # Padded by repeating the last event (matched once, same position).
        last = min(k, len(ids) - 1)
        params |= {f"i{k}": ids[last], f"p{k}": positions.value(last)}
    # Queued where the driver queues (the publication's count checked before the COMMIT).
    await write_later(
        tx.conn,
        _publish_many(size, claimed=owner is not None, after_advance=positions.on_server),
        params,
        expect=len(ids),
        what="publication of locked events",
    )


@functools.cache
def _publish_many(rows: int, *, claimed: bool, after_advance: bool = False) -> Update:
    """→ published for the events ``i0``…, each at its position ``p0``…: one statement for the
    whole batch. ``claimed``: they are in ``processing`` by ``b_owner``; else still pending.
    ``after_advance`` (MySQL): each ``p`` is an offset from the sequence's value just set by
    the counter's move in this session (``LAST_INSERT_ID()``, sql/outbox_sequence.py)."""
    ids: list[BindParameter[Any]] = [bindparam(f"i{k}") for k in range(rows)]
    offset = case(*[(_o.id == ids[k], bindparam(f"p{k}")) for k in range(rows)])
    position = func.last_insert_id() + offset if after_advance else offset
    guard = (
        [_o.status == _PROCESSING, _o.lockedBy == bindparam("b_owner")]
        if claimed
        else [_o.status == _PENDING]
    )
    return (
        update(_outbox)
        .where(_o.id.in_(ids), *guard)
        .values(
            status=OutboxStatus.PUBLISHED.value,
            publishedAt=db_now(),
            lockedBy=None,
            lockedAt=None,
            publishedSeq=position,
        )
    )


_SELECT_STILL_OURS = (
    select(_o.id)
    .where(
        _o.id.in_(bindparam("b_ids", expanding=True)),
        _o.status == _PROCESSING,
        _o.lockedBy == bindparam("b_owner"),
    )
    .order_by(_o.id)
    .with_for_update()
)
_RELEASE_STALE = (
    update(_outbox)
    .where(
        _o.status == _PROCESSING,
        _o.lockedAt < db_now(-bindparam("b_timeout_ms", type_=Integer)),
    )
    .values(status=_PENDING, lockedBy=None, lockedAt=None)
)
_SELECT_CLAIMABLE = (
    select(_o.id)
    .where(_o.status == _PENDING, _o.availableAt <= db_now())
    .order_by(_o.availableAt, _o.id)
    .limit(bindparam("b_limit"))
    .with_for_update(skip_locked=True)
)
#: The claim of a round in one transaction: the events themselves, locked until it commits.
_SELECT_PENDING = (
    select(_o.id, _o.eventType, _o.aggregateId, _o.payload, _o.attemptCount, _o.createdAt)
    .where(_o.status == _PENDING, _o.availableAt <= db_now())
    .order_by(_o.availableAt, _o.id)
    .limit(bindparam("b_limit"))
    .with_for_update(skip_locked=True)
)
_CLAIM = (
    update(_outbox)
    .where(_o.id.in_(bindparam("b_ids", expanding=True)), _o.status == _PENDING)
    .values(status=_PROCESSING, lockedAt=db_now())
)
_SELECT_CLAIMED = (
    select(_o.id, _o.eventType, _o.aggregateId, _o.payload, _o.attemptCount, _o.createdAt)
    .where(
        _o.id.in_(bindparam("b_ids", expanding=True)),
        _o.lockedBy == bindparam("b_owner"),
        _o.status == _PROCESSING,
    )
    .order_by(_o.id)
)


class DispatchWaker:
    """Delivers ``ai.job.enqueue`` by waking this scheduler's lease dispatch: for jobs created
    through another replica (``woken`` says which ones this replica already dispatched when it
    created them, so a new job wakes dispatch once)."""

    immediate = True
    event_types: frozenset[EventType] | None = frozenset({EventType.ENQUEUE})

    def __init__(self, notify: Callable[[], None], woken: Callable[[str], bool]) -> None:
        self._notify = notify
        self._woken = woken

    async def deliver(self, event: ClaimedEvent) -> None:
        if event.event_type == EventType.ENQUEUE and not self._woken(event.aggregate_id):
            self._notify()


_UNSETTLED = select(_o.id).where(_o.status.in_([_PENDING, _PROCESSING])).limit(1)


async def _unsettled(tx: SqlTransaction) -> bool:
    """Whether any event is pending or being delivered, here or by another replica."""
    return (await tx.conn.execute(_UNSETTLED)).first() is not None

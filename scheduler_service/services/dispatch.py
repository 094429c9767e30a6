"""Dispatch: pushing leases down the Poll streams connected to this scheduler.

One task per scheduler claims work for the streams that have free slots. It wakes at once when a
job is created through this scheduler (``notify``), and otherwise every ``poll_interval_s``, which
bounds how long a job created through another replica (or whose retry backoff just ended) waits.
Claims are ``FOR UPDATE SKIP LOCKED`` batches, so replicas never wait on or double-lease each
other's rows. The same tick pushes cancel notices for running jobs that this scheduler's streams
hold, including cancels requested through another replica.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from scheduler_service.core.records import LeasePayload
from scheduler_service.ports import NewJobRows, Transaction
from scheduler_service.services import metrics
from scheduler_service.services.leasing import Leasing
from scheduler_service.services.loops import RoundLoop
from scheduler_service.services.reports import ReportAnswer

__all__ = ["Ack", "CancelNotice", "LeaseDispatcher", "StreamSession"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CancelNotice:
    job_id: str
    attempt_no: int


@dataclass(frozen=True, slots=True)
class Ack:
    """The answer to one report sent on the stream: its outcome, or the error its unary call
    would raise."""

    report_id: int
    answer: ReportAnswer


class Closing:
    """Put on a stream's queue to end it: the replica is stopping."""


CLOSING = Closing()


class ReaderEnded:
    """Put on a stream's queue when its reader ended (the runtime closed its side, or broke
    the protocol): the sender, waiting on the queue alone, learns of it there."""


READER_ENDED = ReaderEnded()

Message = LeasePayload | CancelNotice | Ack | Closing | ReaderEnded


#: Runtime instances whose strikes are remembered (the oldest are forgotten first).
MAX_STRUCK_RUNTIMES = 10_000


@dataclass(eq=False)
class StreamSession:
    """One runtime's Poll stream: what it serves, its free slots, and its outgoing messages."""

    runtime_instance_id: str
    job_types: frozenset[str]
    slots: int
    credits: int = 0
    outgoing: asyncio.Queue[Message] = field(default_factory=asyncio.Queue)
    #: Leases sent on this stream (job id -> attempt), newest last; bounded, see ``remember``.
    held: OrderedDict[str, int] = field(default_factory=OrderedDict)
    cancels_sent: set[tuple[str, int]] = field(default_factory=set)
    closed: bool = False
    #: Leases and acks go in frames of what is ready together (the runtime asked for it).
    batch_frames: bool = False
    #: The slots it subscribed with; ``slots`` is lower while it has strikes.
    subscribed_slots: int = field(init=False, default=0)
    #: When the runtime last sent anything (event-loop time); a silent stream's leases are not
    #: kept alive.
    last_seen: float = field(default_factory=lambda: asyncio.get_running_loop().time())

    def __post_init__(self) -> None:
        self.credits = self.slots
        self.subscribed_slots = self.slots

    def strike(self) -> None:
        """One of this runtime's leases expired unreported: one slot fewer (never below one),
        so a stream that hoards leases cannot burn other users' attempts at its full width. Its
        free slots stay free: a strike takes capacity, never work it is waiting for (an idle
        runtime with as many strikes as slots was once given nothing for good)."""
        self.slots = max(1, self.slots - 1)
        self.credits = min(self.credits, self.slots)

    def restore(self, *, freed: bool = False) -> None:
        """One struck slot back: it reported a result or failure (its credit comes with the
        report), or a strike healed with time (``freed``: the slot comes back free)."""
        if self.slots < self.subscribed_slots:
            self.slots += 1
            if freed:
                self.credits = min(self.slots, self.credits + 1)

    def seen(self) -> None:
        self.last_seen = asyncio.get_running_loop().time()

    def add_credit(self, slots: int) -> None:
        # A runtime cannot hold more than it subscribed with, whatever credits it sends.
        self.credits = min(self.slots, self.credits + slots)

    def remember(self, lease: LeasePayload) -> None:
        self.held[lease.job_id] = lease.attempt_no
        # The runtime holds at most ``slots`` leases; older entries are long finished. A cancel
        # for a job that falls out still reaches its runtime through the heartbeat reply.
        while len(self.held) > max(64, self.slots * 8):
            self.held.popitem(last=False)

    def forget(self, job_id: str) -> None:
        self.held.pop(job_id, None)


#: Turns of the event loop a create's hand-off gives its leases' streams before its reply.
_TURNS_BEFORE_REPLY = 2

#: How many created jobs the dispatcher remembers having dispatched (their outbox events come
#: within a round or two of the commit).
_DISPATCHED_REMEMBERED = 50_000


class LeaseDispatcher(RoundLoop):
    def __init__(
        self,
        leasing: Leasing,
        *,
        poll_interval_s: float = 0.25,
        batch_max: int = 64,
        on_leased: Callable[[str], None] = lambda _job_id: None,
        strike_heal_s: float = 120.0,
    ) -> None:
        super().__init__("dispatcher", poll_interval_s)
        #: A strike is forgiven after this long without a new one (a slot a period comes back).
        self._strike_heal_s = strike_heal_s
        self._on_leased = on_leased
        self._leasing = leasing
        self._uow = leasing.uow
        self._batch_max = batch_max
        self._sessions: list[StreamSession] = []
        self._last_cancel_scan = 0.0
        #: Leases reaped unreported per runtime instance (count, loop time of the last change),
        #: newest last.
        self._strikes: OrderedDict[str, tuple[int, float]] = OrderedDict()
        #: Jobs created here lately, already dispatched (handed off or woken for) at their
        #: commit: their outbox event need not wake dispatch again.
        self._dispatched: OrderedDict[str, None] = OrderedDict()
        #: Jobs a create's hand-off leased, until its commit's wake-up.
        self._handed_off: set[str] = set()

    # -- wiring -------------------------------------------------------------------------------

    def attach(self, session: StreamSession) -> None:
        """A new stream (called in its own context: its token decides what it may claim). The
        first stream of an instance starts clean: a runtime restarted after a crash, whose
        leases were reaped, gets work at once. A second stream beside a live one keeps the
        instance's strikes on its slots."""
        instance = session.runtime_instance_id
        self._leasing.stream_subscribed(instance)
        if any(s.runtime_instance_id == instance for s in self.sessions()):
            strikes, _ = self._strikes.get(instance, (0, 0.0))
            session.slots = max(1, session.slots - strikes)
            session.credits = session.slots
        else:
            self._strikes.pop(instance, None)
        self._sessions.append(session)
        metrics.POLL_STREAMS.set(len(self._sessions))
        self.notify()

    def detach(self, session: StreamSession) -> None:
        session.closed = True
        if session in self._sessions:
            self._sessions.remove(session)
            metrics.POLL_STREAMS.set(len(self._sessions))

    def lease_expired(self, holder: str) -> None:
        """The reaper took back a lease ``holder`` never reported."""
        strikes, _ = self._strikes.pop(holder, (0, 0.0))
        self._strikes[holder] = (strikes + 1, asyncio.get_running_loop().time())
        while len(self._strikes) > MAX_STRUCK_RUNTIMES:
            self._strikes.popitem(last=False)
        for session in self._sessions:
            if session.runtime_instance_id == holder:
                session.strike()

    def report_accepted(self, holder: str) -> None:
        """``holder`` reported a result or a failure: it forgives one strike."""
        self._forgive(holder, freed=False)

    def _forgive(self, holder: str, *, freed: bool) -> None:
        strikes, _ = self._strikes.pop(holder, (0, 0.0))
        if strikes > 1:
            self._strikes[holder] = (strikes - 1, asyncio.get_running_loop().time())
        for session in self._sessions:
            if session.runtime_instance_id == holder:
                session.restore(freed=freed)

    def heal_strikes(self) -> None:
        """Forgive one strike of each instance that earned none for a heal period: a runtime
        that lost leases once (a freeze, a slow model) gets its slots back with time."""
        now = asyncio.get_running_loop().time()
        healed = [h for h, (_, at) in self._strikes.items() if now - at >= self._strike_heal_s]
        for holder in healed:
            self._forgive(holder, freed=True)
        if healed:
            self.notify()

    def sessions(self) -> list[StreamSession]:
        """The open streams attached here."""
        return [s for s in self._sessions if not s.closed]

    def subscribed(self) -> list[str]:
        """Runtime instance ids of the streams attached here (for tests and diagnostics)."""
        return [s.runtime_instance_id for s in self._sessions if not s.closed]

    def forget(self, job_id: str) -> None:
        for session in self._sessions:
            session.forget(job_id)

    def push_cancel(self, job_id: str) -> None:
        """Tell the stream holding ``job_id`` to stop it, if that stream is connected here."""
        for session in self._sessions:
            attempt = session.held.get(job_id)
            if attempt is not None:
                self._send_cancel(session, CancelNotice(job_id, attempt))

    @staticmethod
    def _send_cancel(session: StreamSession, notice: CancelNotice) -> None:
        key = (notice.job_id, notice.attempt_no)
        if key not in session.cancels_sent:
            session.cancels_sent.add(key)
            session.outgoing.put_nowait(notice)

    # -- the loop -----------------------------------------------------------------------------

    async def _round(self) -> None:
        """Runs when woken (a job was created here, slots came back) or every poll interval."""
        now = asyncio.get_running_loop().time()
        self.heal_strikes()
        if now - self._last_cancel_scan >= self._interval_s:
            self._last_cancel_scan = now
            await self._push_remote_cancels()
        while await self._dispatch_round():
            pass

    async def _dispatch_round(self) -> bool:
        """Offer work to every stream with free slots once; True if another round may find more.

        Streams that want the same job types share one claim, so a thousand idle streams cost one
        query per round rather than a thousand.
        """
        more = False
        sessions = [s for s in self._sessions if s.credits > 0 and not s.closed]
        # Rotate so that the first stream does not always get the freshest work.
        if sessions:
            self._sessions.append(self._sessions.pop(0))
        groups: dict[tuple[str, ...], list[StreamSession]] = {}
        for session in sessions:
            groups.setdefault(tuple(sorted(session.job_types)), []).append(session)
        for job_types, group in groups.items():
            wants = [min(session.credits, self._batch_max) for session in group]
            # Held while the claim runs, so that a create's hand-off cannot spend them too.
            for session, want in zip(group, wants, strict=True):
                session.credits -= want
            try:
                demands = [
                    (s.runtime_instance_id, want) for s, want in zip(group, wants, strict=True)
                ]
                shares = await self._uow.run(
                    functools.partial(
                        self._leasing.claim_within, job_types=job_types, demands=demands
                    )
                )
            finally:
                for session, want in zip(group, wants, strict=True):
                    session.credits += want
            for session, want, leases in zip(group, wants, shares, strict=True):
                if leases and self._deliver(session, leases):
                    more = more or (len(leases) == want and session.credits > 0)
                elif leases:
                    await self._release(session, leases)
        return more

    def _deliver(self, session: StreamSession, leases: Sequence[LeasePayload]) -> bool:
        """Queue ``leases`` on the stream; False if it closed meanwhile (they go back)."""
        if session.closed:
            return False
        session.credits -= len(leases)
        for lease in leases:
            session.remember(lease)
            session.outgoing.put_nowait(lease)
            self._on_leased(lease.job_id)
        return True

    def enqueuing(self, job_ids: Sequence[str]) -> None:
        """Jobs being created here: their commit dispatches them, so their outbox events need
        not (marked before the commit, which the outbox may deliver before its hooks run; a
        create that rolls back leaves marks no event will ever read)."""
        for job_id in job_ids:
            self._dispatched[job_id] = None
        while len(self._dispatched) > _DISPATCHED_REMEMBERED:
            self._dispatched.popitem(last=False)

    def enqueued(self, job_ids: Sequence[str]) -> None:
        """Jobs created here committed: one wake-up for them, unless the create's hand-off
        leased each of them already."""
        if any(job_id not in self._handed_off for job_id in job_ids):
            self.notify()

    def dispatched_here(self, job_id: str) -> bool:
        """Whether ``job_id`` was created here and dispatched at its commit."""
        return job_id in self._dispatched

    async def offer_within(
        self, tx: Transaction, job_type: str, count: int = 1, fresh: NewJobRows | None = None
    ) -> list[tuple[str, LeasePayload]]:
        """Lease up to ``count`` jobs of ``job_type`` to streams of this replica with free slots,
        inside ``tx`` (a create's), so new jobs need not wait for a dispatch round: the leases,
        with their holders.

        The claim is the dispatcher's own (priority, then age, SKIP LOCKED), so an older job
        waiting for the same type goes first and nothing jumps the queue. With ``fresh`` (the
        create's jobs, before their insert), it leases those only when no older job waits, and
        the create writes them leased (``JobStore.create_many``). The slots are held until
        ``tx`` ends; the leases are delivered once it commits (a rollback takes the claim with
        it).
        """
        demands: list[tuple[StreamSession, int]] = []
        left = count
        for session in self._sessions:
            if left <= 0:
                break
            if session.credits > 0 and not session.closed and job_type in session.job_types:
                want = min(session.credits, left)
                session.credits -= want  # held for this transaction: a round cannot spend it
                demands.append((session, want))
                left -= want
        if not demands:
            return []

        held = [want for _, want in demands]

        def give_back() -> None:
            for (session, _), slots in zip(demands, held, strict=True):
                session.credits += slots

        tx.after_rollback(give_back)
        shares = await self._leasing.claim_within(
            tx,
            [job_type],
            [(session.runtime_instance_id, want) for session, want in demands],
            fresh=fresh,
        )
        # The slots the claim did not fill are free again at once (the create's fallback claim
        # for older jobs, or a round, may use them); those it filled stay held to the commit.
        for index, ((session, want), share) in enumerate(zip(demands, shares, strict=True)):
            session.credits += want - len(share)
            held[index] = len(share)
        placed = {lease.job_id for share in shares for lease in share}
        self._handed_off |= placed

        def settled() -> None:  # after the commit's wake-up, which reads it (hooks run in order)
            self._handed_off.difference_update(placed)

        tx.after_commit(settled)
        tx.after_rollback(settled)

        async def deliver() -> None:
            give_back()
            for (session, _), leases in zip(demands, shares, strict=True):
                if leases and not self._deliver(session, leases):
                    await self._release(session, leases)
            # The streams send before this task goes on to its caller's reply: a turn of the
            # loop for each stream to take its leases and hand them to gRPC, one for gRPC's
            # write to get going (one turn measured 0.3 ms slower, three no faster).
            for _ in range(_TURNS_BEFORE_REPLY):
                await asyncio.sleep(0)

        # Ahead of the commit's other wake-ups (outbox, watchers): the stream sends first.
        tx.after_commit(deliver, first=True)
        return [
            (session.runtime_instance_id, lease)
            for (session, _), share in zip(demands, shares, strict=True)
            for lease in share
        ]

    async def _release(self, session: StreamSession, leases: Sequence[LeasePayload]) -> None:
        for lease in leases:
            await self._leasing.release_undelivered(lease, session.runtime_instance_id)

    async def release_undelivered(
        self, session: StreamSession, leases: Sequence[LeasePayload]
    ) -> None:
        """Give back leases a closed stream never delivered (called by the stream handler)."""
        try:
            await self._release(session, leases)
        except Exception:
            # The lease simply expires and the reaper takes it back.
            log.exception("releasing undelivered leases failed", extra={"action": "release_error"})

    async def _push_remote_cancels(self) -> None:
        """Cancel requests made through another replica, for jobs held by streams here."""
        by_instance = {s.runtime_instance_id: s for s in self._sessions if s.held}
        if not by_instance:
            return
        rows = await self._uow.read(lambda tx: tx.sweeps.cancel_requested_held_by(by_instance))
        for job_id, attempt_no, holder in rows:
            self._send_cancel(by_instance[holder], CancelNotice(job_id, attempt_no))

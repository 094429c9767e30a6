"""The Poll stream's protocol, on domain messages: subscribe, credits, delivery, release.

The gRPC servicer turns each incoming ``PollRequest`` into a :class:`Subscribe`, a
:class:`Credit`, a :class:`ReportMessage`, a :class:`ReportFrame` or an :class:`UnknownMessage`,
and each outgoing :data:`Outgoing` into a ``PollResponse``; everything else is here. A lease
counts as delivered once the stream asks for the message after it: a lease the stream never took
(it broke first) goes back to the queue without spending an attempt.

A stream subscribed with ``batch_frames`` gets what is ready together in one frame: every lease
queued for it in a :class:`LeaseFrame`, every ack in an :class:`AckFrame` (cancel notices stay
single). Nothing waits to fill a frame: a frame holds what was queued when the stream was ready
to send, so under load frames grow and when idle each lease goes at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

from scheduler_service.core import identity, validation
from scheduler_service.core.errors import (
    DatabaseUnavailableError,
    InvalidRequestError,
    LimitExceededError,
    SchedulerError,
    ShuttingDownError,
    echo,
)
from scheduler_service.core.job_registry import JobRegistry
from scheduler_service.core.records import LeasePayload
from scheduler_service.core.stream_caps import StreamCap
from scheduler_service.services import metrics
from scheduler_service.services.dispatch import (
    CLOSING,
    READER_ENDED,
    Ack,
    CancelNotice,
    Closing,
    LeaseDispatcher,
    ReaderEnded,
    StreamSession,
)
from scheduler_service.services.group_commit import ReportBatcher
from scheduler_service.services.reports import (
    ChunkReport,
    FailureOutcome,
    FailureReport,
    HeartbeatReport,
    Report,
    ReportAnswer,
    ResultSubmission,
    SubmitOutcome,
)
from shared.error_codes import ErrorCode

__all__ = [
    "Ack",
    "AckFrame",
    "Credit",
    "Incoming",
    "Keepalive",
    "LeaseFrame",
    "Outgoing",
    "PollSessions",
    "ReportFrame",
    "ReportMessage",
    "Subscribe",
    "UnknownMessage",
]

log = logging.getLogger(__name__)

MAX_SLOTS = 1_000
_KIND = {
    ResultSubmission: "result",
    FailureReport: "failure",
    HeartbeatReport: "heartbeat",
    ChunkReport: "output_chunk",
}


@dataclass(frozen=True, slots=True)
class Subscribe:
    runtime_instance_id: str
    job_types: tuple[str, ...]
    slots: int
    #: (job id, attempt) of leases the runtime still runs, after a reconnect.
    held: tuple[tuple[str, int], ...] = ()
    #: Leases and acks come in frames of what was ready together.
    batch_frames: bool = False


@dataclass(frozen=True, slots=True)
class Credit:
    slots: int


@dataclass(frozen=True, slots=True)
class ReportMessage:
    """A result, failure or heartbeat sent on the stream; answered by an :class:`Ack`."""

    report_id: int
    report: Report


@dataclass(frozen=True, slots=True)
class ReportFrame:
    """Reports sent together in one frame; each is answered by its own :class:`Ack`."""

    reports: tuple[ReportMessage, ...]


@dataclass(frozen=True, slots=True)
class LeaseFrame:
    """Leases that were ready together, for a stream subscribed with ``batch_frames``."""

    leases: tuple[LeasePayload, ...]


@dataclass(frozen=True, slots=True)
class AckFrame:
    """Acks that were ready together, for a stream subscribed with ``batch_frames``."""

    acks: tuple[Ack, ...]


@dataclass(frozen=True, slots=True)
class Keepalive:
    """The runtime is alive (it sends one at least every keepalive interval)."""


@dataclass(frozen=True, slots=True)
class UnknownMessage:
    """A message kind this scheduler does not know (a newer client)."""

    kind: str


Incoming = Subscribe | Credit | ReportMessage | ReportFrame | Keepalive | UnknownMessage
Outgoing = LeasePayload | CancelNotice | Ack | LeaseFrame | AckFrame

#: Reports one frame may carry (a runtime holds at most MAX_SLOTS leases, each reporting once
#: or twice at a time).
MAX_FRAME_REPORTS = 4 * MAX_SLOTS


class PollSessions:
    """This replica's Poll streams: admission, then one session per stream."""

    def __init__(
        self,
        dispatcher: LeaseDispatcher,
        registry: JobRegistry,
        reports: ReportBatcher,
        *,
        max_streams: int,
        subscribe_timeout_s: float,
        max_streams_per_token: int = 1_000,
        max_slots: int = 256,
    ) -> None:
        self._dispatcher = dispatcher
        self._registry = registry
        self._reports = reports
        self._max_streams = max_streams
        self._per_token = StreamCap("Poll", max_streams_per_token)
        self._max_slots = min(max_slots, MAX_SLOTS)
        self._subscribe_timeout_s = subscribe_timeout_s
        self._open = 0
        self._closing = False
        #: Kept by the app's database watcher: while the database is unreachable a new stream
        #: is refused UNAVAILABLE (a runtime then retries, or goes to another replica).
        self.database_reachable = True

    def shut_down(self) -> None:
        """End every Poll stream now (UNAVAILABLE, so runtimes reconnect to another replica) and
        refuse new ones: an idle stream would otherwise hold the server's stop for its whole
        grace period. Undelivered leases go back as when a stream breaks."""
        self._closing = True
        for session in self._dispatcher.sessions():
            session.outgoing.put_nowait(CLOSING)

    async def serve(self, incoming: AsyncIterator[Incoming]) -> AsyncGenerator[Outgoing, None]:
        """The messages of one stream, until the runtime closes its side.

        Raises :class:`LimitExceededError` (TOO_MANY_STREAMS) when this replica holds its limit
        of streams, :class:`InvalidRequestError` for a protocol error by the runtime.
        """
        if self._closing:
            raise ShuttingDownError("this scheduler is shutting down; reconnect")
        if not self.database_reachable:
            raise DatabaseUnavailableError("the database is unavailable, try again")
        if self._open >= self._max_streams:
            raise LimitExceededError(
                ErrorCode.TOO_MANY_STREAMS,
                f"this scheduler holds its limit of {self._max_streams} Poll streams; retry later",
            )
        with self._per_token.held():
            self._open += 1
            try:
                session = self._session(await self._first(incoming))
                # Closed with this generator, so the stream's leftovers are released at once.
                async with contextlib.aclosing(self._run(session, incoming)) as messages:
                    async for message in messages:
                        yield message
            finally:
                self._open -= 1

    async def _first(self, incoming: AsyncIterator[Incoming]) -> Subscribe:
        try:
            first = await asyncio.wait_for(anext(incoming, None), self._subscribe_timeout_s)
        except TimeoutError:
            first = None
        if not isinstance(first, Subscribe):
            raise InvalidRequestError("the first Poll message must be subscribe")
        return first

    def _session(self, sub: Subscribe) -> StreamSession:
        validation.instance_id(sub.runtime_instance_id)
        identity.claim_instance(sub.runtime_instance_id)
        if not 1 <= sub.slots <= self._max_slots:
            raise InvalidRequestError(f"slots must be 1-{self._max_slots}", field="slots")
        unknown = [t for t in sub.job_types if t not in self._registry]
        if not sub.job_types or unknown:
            raise InvalidRequestError(
                f"job_types must name registered job types (unknown: {echo(unknown)})",
                field="job_types",
            )
        session = StreamSession(
            sub.runtime_instance_id,
            frozenset(sub.job_types),
            sub.slots,
            batch_frames=sub.batch_frames,
        )
        for job_id, attempt_no in sub.held[:MAX_SLOTS]:
            # Kept alive with the stream's other leases, and their cancel notices come here.
            session.held[job_id] = attempt_no
        return session

    async def _run(
        self, session: StreamSession, incoming: AsyncIterator[Incoming]
    ) -> AsyncGenerator[Outgoing, None]:
        reader = asyncio.get_running_loop().create_task(self._read(session, incoming))
        reader.add_done_callback(lambda _: session.outgoing.put_nowait(READER_ENDED))
        undelivered: tuple[LeasePayload, ...] = ()
        self._dispatcher.attach(session)
        # DEBUG: runtimes that reconnect in a loop would otherwise write the log full.
        log.debug(
            "runtime subscribed",
            extra={"action": "poll_subscribe", "runtimeId": session.runtime_instance_id},
        )
        try:
            while (message := await _next_message(session, reader)) is not None:
                frames = _frames(message, session) if session.batch_frames else (message,)
                for frame in frames:
                    undelivered = _leases_in(frame)
                    yield frame
                    undelivered = ()
        finally:
            self._dispatcher.detach(session)
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            leftovers = [*undelivered, *_leases_queued(session)]
            if leftovers:
                await self._dispatcher.release_undelivered(session, leftovers)
            log.debug(
                "runtime unsubscribed",
                extra={"action": "poll_end", "runtimeId": session.runtime_instance_id},
            )

    async def _read(self, session: StreamSession, incoming: AsyncIterator[Incoming]) -> None:
        answering: set[asyncio.Task[None]] = set()
        try:
            async for message in incoming:
                session.seen()
                match message:
                    case Credit(slots=slots) if slots > 0:
                        session.add_credit(slots)
                        self._dispatcher.notify()
                    case ReportMessage():
                        self._answering(answering, session, (message,))
                    case ReportFrame(reports=reports) if 0 < len(reports) <= MAX_FRAME_REPORTS:
                        self._answering(answering, session, reports)
                    case Keepalive():
                        pass
                    case _:
                        # A bad message ends the stream with INVALID_ARGUMENT.
                        raise InvalidRequestError(
                            "after subscribe, Poll messages must be credit (slots ≥ 1), report, "
                            f"report_batch (1-{MAX_FRAME_REPORTS} reports) or keepalive"
                        )
        finally:
            # Reports already taken are applied whatever happens to the stream; only their
            # acks are lost (the runtime repeats them as unary calls, keyed idempotently).
            await asyncio.gather(*answering, return_exceptions=True)

    def _answering(
        self,
        answering: set[asyncio.Task[None]],
        session: StreamSession,
        reports: tuple[ReportMessage, ...],
    ) -> None:
        task = asyncio.get_running_loop().create_task(self._answer(session, reports))
        answering.add(task)
        task.add_done_callback(answering.discard)

    async def _answer(self, session: StreamSession, messages: tuple[ReportMessage, ...]) -> None:
        """Each report's ack, once its group commit has run; reports of one frame join the
        same gathering, so their acks are ready together."""
        pending: list[tuple[ReportMessage, ReportAnswer | asyncio.Future[ReportAnswer]]] = []
        for message in messages:
            try:
                pending.append((message, self._reports.enqueue(message.report)))
            except SchedulerError as refused:
                pending.append((message, refused))
        for message, waiting in pending:
            answer = await waiting if isinstance(waiting, asyncio.Future) else waiting
            if isinstance(answer, SubmitOutcome | FailureOutcome):
                self._dispatcher.report_accepted(session.runtime_instance_id)
            code = answer.status if isinstance(answer, SchedulerError) else "OK"
            if isinstance(answer, Exception) and not isinstance(answer, SchedulerError):
                code = "INTERNAL"
            metrics.REPORTS.labels(_KIND[type(message.report)], code).inc()
            if not session.closed:
                session.outgoing.put_nowait(Ack(message.report_id, answer))


#: Turns of the loop a busy stream waits before it takes what is queued (the wait on a task
#: and ``asyncio.wait`` this replaced took two, and the frames that gathered meanwhile were
#: worth a tenth of the drain).
_TURNS_BEFORE_A_FRAME = 2


async def _next_message(session: StreamSession, reader: asyncio.Task[None]) -> Outgoing | None:
    """The next message to send, or None once the runtime closed its side.

    Awaited on the queue itself, which the reader's end also reaches (``READER_ENDED``): a
    lease put there wakes this stream at once, with no task or ``asyncio.wait`` between."""
    if not session.outgoing.empty():
        # Under load: the loop's turns that hand this stream more (acks of a group commit,
        # leases of a claim) come first, and go out in the same frame.
        for _ in range(_TURNS_BEFORE_A_FRAME):
            await asyncio.sleep(0)
    message = await session.outgoing.get()
    if isinstance(message, Closing):
        raise ShuttingDownError("this scheduler is shutting down; reconnect")
    if isinstance(message, ReaderEnded):
        reader.result()  # re-raises a protocol error from the runtime's side
        return None
    return message


def _frames(first: Outgoing, session: StreamSession) -> tuple[Outgoing, ...]:
    """``first`` and everything queued behind it, as frames: the leases in one, cancel notices
    one by one after them (a cancel never overtakes its lease), the acks in one."""
    items = [first]
    while not session.outgoing.empty():
        item = session.outgoing.get_nowait()
        if isinstance(item, Closing | ReaderEnded):
            session.outgoing.put_nowait(item)  # ends the stream once these are sent
            break
        items.append(item)
    leases = tuple(m for m in items if isinstance(m, LeasePayload))
    acks = tuple(m for m in items if isinstance(m, Ack))
    cancels = tuple(m for m in items if isinstance(m, CancelNotice))
    frames: list[Outgoing] = []
    if leases:
        frames.append(LeaseFrame(leases))
    frames.extend(cancels)
    if acks:
        frames.append(AckFrame(acks))
    return tuple(frames)


def _leases_in(frame: Outgoing) -> tuple[LeasePayload, ...]:
    if isinstance(frame, LeasePayload):
        return (frame,)
    if isinstance(frame, LeaseFrame):
        return frame.leases
    return ()


def _leases_queued(session: StreamSession) -> list[LeasePayload]:
    """Leases still queued for a stream that ended: never sent, they go back."""
    leases: list[LeasePayload] = []
    while not session.outgoing.empty():
        item = session.outgoing.get_nowait()
        if isinstance(item, LeasePayload):
            leases.append(item)
    return leases

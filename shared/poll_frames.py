"""Batched frames on the Poll stream: what is ready together travels in one message.

A runtime that subscribes with ``batch_frames`` gets its leases in ``LeaseBatch`` frames and its
acks in ``AckBatch`` frames, and sends its reports in ``ReportBatch`` frames. Per job the stream
then carries a share of a message instead of four messages, which is what a job's gRPC cost was
made of (docs/performance.md). Every lease and report keeps its own token, guard and answer; a
frame is only an envelope.

:func:`outgoing_frames` is the runtime's sending side (used by ``runtime_service`` and the
benchmark runtimes); :func:`chunked` bounds a frame's size on either side.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterable, Iterator
from typing import TypeVar

from google.protobuf.message import Message

from shared.gen.aijob.v1 import runtime_service_pb2 as rt

__all__ = [
    "FRAME_BYTES",
    "FRAME_ITEMS",
    "LEASE_BYTES",
    "chunked",
    "coalesce",
    "end_requests",
    "outgoing_frames",
    "outgoing_messages",
]

#: A frame stays under this many bytes (well under gRPC's 4 MiB message limit) unless a single
#: item is larger on its own; the rest go in the next frame.
FRAME_BYTES = 1024 * 1024
#: And holds at most this many items (a scheduler refuses a ReportBatch of more than 4,000).
FRAME_ITEMS = 1000
#: A lease is at most this large: a runtime's channel receives messages of up to gRPC's 4 MiB,
#: and a frame's envelope takes a little of that.
LEASE_BYTES = 4 * 1024 * 1024 - 64 * 1024

M = TypeVar("M", bound=Message)

#: Put on a request queue by :func:`end_requests`; never sent.
_END = rt.PollRequest()


def chunked(
    items: Iterable[M], limit: int = FRAME_BYTES, max_items: int = FRAME_ITEMS
) -> Iterator[list[M]]:
    """``items`` in order, in runs of at most ``limit`` serialized bytes and ``max_items`` items
    (an item larger than ``limit`` alone in its run)."""
    run: list[M] = []
    size = 0
    for item in items:
        item_size = item.ByteSize()
        if run and (size + item_size > limit or len(run) >= max_items):
            yield run
            run, size = [], 0
        run.append(item)
        size += item_size
    if run:
        yield run


def coalesce(ready: list[rt.PollRequest]) -> list[rt.PollRequest]:
    """``ready`` as few frames: every report in ``ReportBatch`` frames, the credits summed into
    one, and a keepalive only when nothing else goes (any message shows the runtime alive)."""
    reports: list[rt.PollReport] = []
    credit = 0
    keepalive = False
    others: list[rt.PollRequest] = []
    for request in ready:
        match request.WhichOneof("kind"):
            case "report":
                reports.append(request.report)
            case "report_batch":
                reports.extend(request.report_batch.reports)
            case "credit":
                credit += request.credit.slots
            case "keepalive":
                keepalive = True
            case _:
                others.append(request)
    frames = [rt.PollRequest(report_batch=rt.ReportBatch(reports=run)) for run in chunked(reports)]
    if credit:
        frames.append(rt.PollRequest(credit=rt.PollCredit(slots=credit)))
    frames.extend(others)
    if keepalive and not frames:
        frames.append(rt.PollRequest(keepalive=rt.PollKeepalive()))
    return frames


def _ready(queue: asyncio.Queue[rt.PollRequest]) -> list[rt.PollRequest]:
    items: list[rt.PollRequest] = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items


def end_requests(queue: asyncio.Queue[rt.PollRequest]) -> None:
    """End the request side of the stream fed from ``queue``: its generator
    (:func:`outgoing_frames`, :func:`outgoing_messages`) sends what was put before and returns.

    A stream must end this way when it closes. grpc.aio pumps a call's request generator from a
    task of its own, and cancelling a call the server has already ended does not stop that task.
    Left waiting on the queue, it is destroyed pending by the garbage collector later, and the
    generator is finalized mid-await (an unraisable error wherever that happens), once per
    reconnect."""
    queue.put_nowait(_END)


async def outgoing_messages(
    queue: asyncio.Queue[rt.PollRequest],
) -> AsyncGenerator[rt.PollRequest, None]:
    """The requests put on ``queue``, one message each, until :func:`end_requests`."""
    while (request := await queue.get()) is not _END:
        yield request


async def outgoing_frames(
    queue: asyncio.Queue[rt.PollRequest],
    *,
    window_s: float,
) -> AsyncGenerator[rt.PollRequest, None]:
    """The requests put on ``queue``, as frames, until :func:`end_requests`.

    A message found alone goes at once: a lone report is never held. When more were ready
    together (a burst), the frame waits ``window_s`` for the rest of the burst before it goes.
    While gRPC writes one frame, what arrives meanwhile gathers for the next.
    """
    while True:
        ready = [await queue.get(), *_ready(queue)]
        if len(ready) > 1 and window_s > 0 and not any(r is _END for r in ready):
            await asyncio.sleep(window_s)
            ready.extend(_ready(queue))
        ready, ended = _until_end(ready)
        for frame in coalesce(ready):
            yield frame
        if ended:
            return


def _until_end(ready: list[rt.PollRequest]) -> tuple[list[rt.PollRequest], bool]:
    """What came before :func:`end_requests`, and whether it came."""
    for index, request in enumerate(ready):
        if request is _END:
            return ready[:index], True
    return ready, False

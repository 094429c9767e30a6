"""Reports (results, failures, heartbeats) sent on the Poll stream, each waiting for its ack.

The stream is the fast path: reports from every job share it, and the scheduler applies the ones
that arrive together in one transaction. When the stream breaks before a report's ack, the report
fails with :class:`StreamBroken` and the caller repeats it as a unary call — safe, because results
are keyed ``jobId:attemptNo:outputHash`` and a repeated failure or heartbeat is refused as a lost
lease at worst.
"""

from __future__ import annotations

import asyncio

from shared.gen.aijob.v1 import runtime_service_pb2 as rt

__all__ = ["StreamBroken", "StreamReports"]


class StreamBroken(Exception):
    """No stream, or it ended before the ack."""


class StreamReports:
    def __init__(self) -> None:
        self._outgoing: asyncio.Queue[rt.PollRequest] | None = None
        self._acks: dict[int, asyncio.Future[rt.ReportAck]] = {}
        self._next_id = 0

    def attach(self, outgoing: asyncio.Queue[rt.PollRequest]) -> None:
        """A stream is up; its requests are read from ``outgoing``."""
        self._outgoing = outgoing

    def detach(self) -> None:
        """The stream ended: reports still waiting fail over to unary calls."""
        self._outgoing = None
        acks, self._acks = self._acks, {}
        for future in acks.values():
            if not future.done():
                future.set_exception(StreamBroken())

    async def send(self, report: rt.PollReport, timeout_s: float) -> rt.ReportAck:
        if self._outgoing is None:
            raise StreamBroken()
        self._next_id += 1
        report.report_id = self._next_id
        future: asyncio.Future[rt.ReportAck] = asyncio.get_running_loop().create_future()
        self._acks[report.report_id] = future
        self._outgoing.put_nowait(rt.PollRequest(report=report))
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            raise StreamBroken() from None
        finally:
            self._acks.pop(report.report_id, None)

    def acked(self, ack: rt.ReportAck) -> None:
        future = self._acks.get(ack.report_id)
        if future is not None and not future.done():
            future.set_result(ack)

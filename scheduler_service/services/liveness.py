"""Stream liveness: a Poll stream that is alive keeps its runtime's leases alive.

Every interval, one statement per replica extends every lease held by a runtime whose stream here
has sent anything (a keepalive, a credit, a report) within the alive window, so a job needs no
per-job heartbeat to stay leased; per-job heartbeats carry progress only. A frozen
or partitioned runtime stops sending, its stream goes quiet, and its leases run out as before
(fenced by attempt and holder, reaped after their grace).
"""

from __future__ import annotations

import asyncio
import logging

from scheduler_service.ports import UnitOfWork
from scheduler_service.services.dispatch import LeaseDispatcher
from scheduler_service.services.loops import RoundLoop

__all__ = ["LeaseKeeper"]

log = logging.getLogger(__name__)


class LeaseKeeper(RoundLoop):
    def __init__(
        self, uow: UnitOfWork, dispatcher: LeaseDispatcher, *, interval_s: float, alive_s: float
    ) -> None:
        super().__init__("lease-keeper", interval_s)
        self._uow = uow
        self._dispatcher = dispatcher
        self._alive_s = alive_s

    def alive_holders(self) -> set[str]:
        """Runtime instances whose every stream here spoke within the alive window. A second
        stream naming a frozen runtime's instance id must not keep the frozen one's leases
        alive until their jobs time out: while any stream of an instance is silent, its leases
        live on heartbeats alone."""
        now = asyncio.get_running_loop().time()
        spoke: set[str] = set()
        silent: set[str] = set()
        for session in self._dispatcher.sessions():
            fresh = now - session.last_seen <= self._alive_s
            (spoke if fresh else silent).add(session.runtime_instance_id)
        return spoke - silent

    async def keep_once(self) -> int:
        holders = self.alive_holders()
        if not holders:
            return 0
        return await self._uow.run(lambda tx: tx.jobs.keep_alive(holders))

    async def _round(self) -> None:
        # A failure waits for the next round (loops.FailureStreak): leases have their grace.
        await self.keep_once()

"""Jobs that wait for the cheap hours, pure: whether dispatch may lease an off-peak job
now, and until when one waits.

A job whose cost policy is ``off_peak`` is not leased during a peak window
(:class:`~scheduler_service.core.peak_hours.PeakHours`) unless waiting for the window's end
would miss its schedule-to-start deadline, leaving room for its attempts: it may wait only while
``deadline > window end + maxAttempts * timeout``. The clock is the database's
(:class:`~scheduler_service.sql.db.clock.DatabaseClock`), never the host's; tests set their own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler_service.core.peak_hours import PeakHours

__all__ = ["IMMEDIATE", "OFF_PEAK", "POLICIES", "CheapHours"]

IMMEDIATE = "immediate"
OFF_PEAK = "off_peak"
POLICIES = (IMMEDIATE, OFF_PEAK)


@dataclass(frozen=True, slots=True)
class CheapHours:
    peak: PeakHours
    #: The database's now (naive UTC); None before it is known (nothing is deferred then).
    clock: Callable[[], datetime | None]

    def defer_ms(self) -> int:
        """How long the current peak window lasts from now (0: off-peak, nothing waits)."""
        now = self.clock()
        ends = None if now is None else self.peak.peak_ends(now)
        if now is None or ends is None:
            return 0
        return max(1, math.ceil((ends - now).total_seconds() * 1000))

    def deferred_until(
        self,
        policy: str,
        queued: bool,
        deadline_at: datetime | None,
        room_ms: int,
        db_now: datetime | None,
    ) -> datetime | None:
        """When a queued off-peak job stops waiting (the window's end), None if it does not wait
        (immediate, not queued, off-peak hours, or a deadline that cannot wait; ``room_ms`` is
        its attempts' time). Judged as the claim judges it: ``deadline_at`` against the
        database's now (``db_now``) plus what is left of the window."""
        wait_ms = self.defer_ms()
        if policy != OFF_PEAK or not queued or db_now is None or wait_ms <= 0:
            return None
        ends = db_now + timedelta(milliseconds=wait_ms)
        if deadline_at is not None and deadline_at <= ends + timedelta(milliseconds=room_ms):
            return None
        return ends

"""A provider's price windows (pure): when a call costs the peak rate.

DeepSeek bills calls that start in its peak windows at twice the off-peak rate (since V4: Monday
to Friday 09:00-12:00 and 14:00-18:00 Beijing time, not on Chinese public holidays). The windows
are data — ``AIJOB_PEAK_HOURS`` and ``AIJOB_OFF_PEAK_DATES`` — in this form::

    mon-fri 09:00-12:00 14:00-18:00 @Asia/Shanghai
    mon-fri 09:00-12:00; sat 10:00-11:00 @Asia/Shanghai     (several day groups)
    (empty)                                                   (no peak: one price)

Times (``HH:MM``, or ``HH:MM:SS``) are local to the zone after ``@``; a window's end is
exclusive (a window does not cross midnight: write two). Off-peak dates are local dates
(``2026-10-01,2026-10-02``) on which no window applies.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["DEEPSEEK_PEAK_HOURS", "PeakHours"]

#: DeepSeek's published peak windows (api-docs.deepseek.com, Models & Pricing).
DEEPSEEK_PEAK_HOURS = "mon-fri 09:00-12:00 14:00-18:00 @Asia/Shanghai"

_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_SPAN = re.compile(r"^(\d{2}):(\d{2})(?::(\d{2}))?-(\d{2}):(\d{2})(?::(\d{2}))?$")
#: How far ahead a window's end or the next window's start is looked for.
_HORIZON_DAYS = 15


@dataclass(frozen=True, slots=True)
class _Window:
    weekday: int
    start: time
    end: time


@dataclass(frozen=True, slots=True)
class PeakHours:
    windows: tuple[_Window, ...]
    zone: ZoneInfo
    off_peak_dates: frozenset[date] = frozenset()

    @classmethod
    def parse(cls, text: str, off_peak_dates: str = "") -> PeakHours:
        spec, _, zone_name = text.partition("@")
        try:
            zone = ZoneInfo(zone_name.strip() or "UTC")
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {zone_name.strip()!r}") from None
        windows: list[_Window] = []
        for group in filter(None, (g.strip() for g in spec.split(";"))):
            days, *spans = group.split()
            if not spans:
                raise ValueError(f"expected days and HH:MM-HH:MM spans, got {group!r}")
            for weekday in _weekdays(days):
                windows += [_Window(weekday, *_span(s)) for s in spans]
        dates = frozenset(
            date.fromisoformat(d.strip()) for d in off_peak_dates.split(",") if d.strip()
        )
        return cls(tuple(windows), zone, dates)

    def is_peak(self, at: datetime) -> bool:
        """Whether a call starting at ``at`` (naive UTC) pays the peak rate."""
        return self._window_at(at) is not None

    def peak_ends(self, at: datetime) -> datetime | None:
        """The end of the peak window ``at`` is in (naive UTC), None off-peak; adjoining
        windows count as one."""
        end = self._window_at(at)
        while end is not None:
            following = self._window_at(end)
            if following is None:
                return end
            end = following
        return None

    def _window_at(self, at: datetime) -> datetime | None:
        local = at.replace(tzinfo=UTC).astimezone(self.zone)
        if local.date() in self.off_peak_dates:
            return None
        for window in self.windows:
            if window.weekday == local.weekday() and window.start <= local.time() < window.end:
                end = datetime.combine(local.date(), window.end, self.zone)
                return end.astimezone(UTC).replace(tzinfo=None)
        return None

    def next_peak(self, at: datetime) -> datetime | None:
        """When the next peak window starts after ``at`` (naive UTC), None if there is none."""
        local = at.replace(tzinfo=UTC).astimezone(self.zone)
        for offset in range(_HORIZON_DAYS):
            day = local.date() + timedelta(days=offset)
            if day in self.off_peak_dates:
                continue
            starts = sorted(w.start for w in self.windows if w.weekday == day.weekday())
            for start in starts:
                begins = datetime.combine(day, start, self.zone)
                if begins > local:
                    return begins.astimezone(UTC).replace(tzinfo=None)
        return None


def _weekdays(days: str) -> Iterable[int]:
    for part in days.lower().split(","):
        first, _, last = part.partition("-")
        if first not in _DAYS or (last and last not in _DAYS):
            raise ValueError(f"expected days like mon-fri or sat,sun, got {days!r}")
        start, stop = _DAYS.index(first), _DAYS.index(last or first)
        yield from range(start, stop + 1)


def _span(text: str) -> tuple[time, time]:
    match = _SPAN.match(text)
    if match is None:
        raise ValueError(f"expected HH:MM-HH:MM (or HH:MM:SS), got {text!r}")
    h1, m1, s1, h2, m2, s2 = (int(g or 0) for g in match.groups())
    try:
        start, end = time(h1, m1, s1), time(h2, m2, s2)
    except ValueError:
        raise ValueError(f"expected times of day (00:00-23:59), got {text!r}") from None
    if end <= start:
        raise ValueError(f"a window must end after it starts, got {text!r}")
    return start, end

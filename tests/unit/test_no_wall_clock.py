"""No module of the scheduler, the runtime or the shared package reads the wall clock: leases,
deadlines and backoffs are computed by the database (``db_now``) and durations by the monotonic
clock, so a host whose clock is off changes nothing (reliability S8)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("scheduler_service", "runtime_service", "shared", "aijob")
WALL_CLOCK = re.compile(
    r"\b(datetime\.now|datetime\.utcnow|date\.today|time\.time|time\.time_ns)\("
)
ALLOWED = {
    # Stamps its answers like the real API does; nothing reads the stamp back.
    "devtools/scripted_model.py",
    # UUIDv7's time field: ids only break ties after createdAt (database time) in every ORDER BY.
    "scheduler_service/core/ids.py",
    # Span timestamps are wall-clock by definition (OTLP); nothing reads them back.
    "shared/tracing.py",
}


def _offenders() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith("shared/gen/") or relative in ALLOWED:
                continue
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                if WALL_CLOCK.search(line):
                    found.append(f"{relative}:{number}: {line.strip()}")
    return found


def test_no_wall_clock_reads() -> None:
    assert _offenders() == []


def test_the_scan_finds_a_wall_clock_read() -> None:
    assert WALL_CLOCK.search("started = datetime.now(UTC)")
    assert WALL_CLOCK.search("t = time.time()")
    assert not WALL_CLOCK.search("t = loop.time()")
    assert not WALL_CLOCK.search("t = time.monotonic()")

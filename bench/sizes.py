"""How big each benchmark phase is: its ``AIJOB_BENCH_*`` setting, else its default, else — with
``AIJOB_BENCH_SMOKE=1`` (``make bench-smoke``) — a tiny size, so that every phase runs in CI in
seconds and a phase that hangs or errors fails the build. Smoke figures measure nothing."""

from __future__ import annotations

import os

__all__ = ["SMOKE", "size", "span_s"]

#: ``make bench-smoke``: every phase, tiny.
SMOKE = os.environ.get("AIJOB_BENCH_SMOKE", "") not in ("", "0")


def size(name: str, default: int, smoke: int) -> int:
    """A count: ``AIJOB_BENCH_<NAME>`` when set, else the smoke or the full default."""
    value = os.environ.get(f"AIJOB_BENCH_{name}")
    return int(value) if value else (smoke if SMOKE else default)


def span_s(name: str, default: float, smoke: float) -> float:
    """A duration in seconds, the same way."""
    value = os.environ.get(f"AIJOB_BENCH_{name}")
    return float(value) if value else (smoke if SMOKE else default)

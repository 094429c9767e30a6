"""Identifiers: time-ordered UUIDs (version 7, RFC 9562) for new rows.

Time order keeps InnoDB primary-key inserts at the right edge of the index instead of scattered
across it, which matters for an insert-heavy job table.
"""

from __future__ import annotations

import os
import re
import time
import uuid

__all__ = ["JOB_ID_PATTERN", "is_valid_job_id", "new_id"]

#: Accepts our UUIDs and the legacy table's ids (cuid-like, ``legacy-01``); VARCHAR(191) bound.
JOB_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,190}$")


_last = [0, 0]  # (milliseconds, 74 random bits) of the previous id from this process


def new_id() -> str:
    """A UUIDv7. Within one process ids are strictly increasing, also within one millisecond
    (RFC 9562 §6.2, method 2: the random part is incremented)."""
    millis = time.time_ns() // 1_000_000
    if millis <= _last[0]:
        millis, rand = _last[0], _last[1] + 1
    else:
        rand = int.from_bytes(os.urandom(10), "big") >> 7  # 73 bits leave room to count up
    _last[0], _last[1] = millis, rand
    high = (millis & ((1 << 48) - 1)) << 16 | 0x7 << 12 | (rand >> 62) & 0xFFF
    low = 0x2 << 62 | rand & ((1 << 62) - 1)
    return str(uuid.UUID(int=high << 64 | low))


def is_valid_job_id(value: str) -> bool:
    return bool(JOB_ID_PATTERN.fullmatch(value))

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


def new_id() -> str:
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (millis & ((1 << 48) - 1)) << 80 | rand & ((1 << 80) - 1)
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return str(uuid.UUID(int=value))


def is_valid_job_id(value: str) -> bool:
    return bool(JOB_ID_PATTERN.fullmatch(value))

"""Canonical JSON and the output hash: the one function both the runtime and the scheduler use.

Canonical form: object keys sorted recursively, separators ``,`` and ``:``, no insignificant
whitespace, UTF-8 with non-ASCII kept as is, integers as integers. Floats that are not finite have
no JSON form and are refused.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["canonical_json", "output_hash", "result_idempotency_key"]


def canonical_json(value: Any) -> bytes:
    """Encode ``value`` as canonical JSON bytes."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def output_hash(value: Any) -> str:
    """SHA-256 of the canonical JSON of ``value``, as 64 lowercase hex digits."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def result_idempotency_key(job_id: str, attempt_no: int, hash_hex: str) -> str:
    """The result key ``jobId:attemptNo:outputHash``."""
    return f"{job_id}:{attempt_no}:{hash_hex}"

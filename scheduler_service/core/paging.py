"""Page tokens: an opaque cursor bound to the filters it was issued for.

The token carries the last row's (createdAt, id) and a checksum over the cursor and the filters, so
a token that was edited, truncated or replayed with other filters is refused (INVALID_ARGUMENT).
Rows are always scoped to the caller in SQL, so a forged cursor can never widen what is visible.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import datetime

from scheduler_service.core.errors import InvalidRequestError

DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 50, 200


@dataclass(frozen=True, slots=True)
class Cursor:
    created_at: datetime
    job_id: str


def page_size(requested: int) -> int:
    if requested <= 0:
        return DEFAULT_PAGE_SIZE
    return min(requested, MAX_PAGE_SIZE)


def _checksum(body: str, scope: str) -> str:
    return hashlib.sha256(f"{scope}\n{body}".encode()).hexdigest()[:24]


def encode(cursor: Cursor, scope: str) -> str:
    body = base64.urlsafe_b64encode(
        json.dumps({"c": cursor.created_at.isoformat(), "i": cursor.job_id}).encode()
    ).decode()
    return f"{body}.{_checksum(body, scope)}"


def decode(token: str, scope: str) -> Cursor | None:
    if not token:
        return None
    body, _, checksum = token.partition(".")
    if not hmac.compare_digest(checksum, _checksum(body, scope)):
        raise InvalidRequestError("page_token is not valid for this request", field="page_token")
    try:
        values = json.loads(base64.urlsafe_b64decode(body.encode()))
        return Cursor(datetime.fromisoformat(values["c"]), str(values["i"]))
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise InvalidRequestError("page_token is not valid", field="page_token") from None

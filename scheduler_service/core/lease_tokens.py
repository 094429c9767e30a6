"""Server-issued lease tokens: the proof that a caller holds a lease.

Naming a runtime instance id proves nothing (any runtime token can name any id), so every lock
hands out a random token; the job row keeps only its SHA-256, so a database reader cannot act as
the holder either, and the token is never logged. Heartbeat, SubmitResult,
SubmitFailure and ResolveCredential must present it; a wrong or missing one is answered exactly
like an expired lease (LEASE_LOST).
"""

from __future__ import annotations

import hashlib
import secrets

__all__ = ["digest", "new_lease_token"]

#: 24 random bytes: 192 bits, above the 128 the design asks for.
_TOKEN_BYTES = 24


def new_lease_token() -> str:
    return secrets.token_urlsafe(_TOKEN_BYTES)


def digest(token: str) -> str:
    """What the job row stores of ``token`` (64 hex digits)."""
    return hashlib.sha256(token.encode()).hexdigest()

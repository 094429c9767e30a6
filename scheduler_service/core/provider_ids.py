"""The end user a model call is for, as the provider sees it: DeepSeek's ``user_id``
isolates content safety, KV cache and scheduling per end user, and caps one user's calls on
accounts with raised quotas. The raw user id never leaves the scheduler: a lease carries an HMAC
of it under a server secret (``AIJOB_PROVIDER_USER_ID_KEY``), the same on every replica and
runtime, in DeepSeek's alphabet (``[A-Za-z0-9_-]``) and well under its 512 bytes. Pure."""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass, field

__all__ = ["MIN_PROVIDER_USER_ID_KEY_BYTES", "ProviderUserIds", "key_length_problem"]

#: A shorter secret could be found by trying keys against one known user's pseudonym.
MIN_PROVIDER_USER_ID_KEY_BYTES = 32


def key_length_problem(key: bytes) -> str | None:
    """Why ``key`` cannot be the secret (too short to resist guessing), or None; empty is fine:
    it switches pseudonyms off."""
    if 0 < len(key) < MIN_PROVIDER_USER_ID_KEY_BYTES:
        return (
            f"must be at least {MIN_PROVIDER_USER_ID_KEY_BYTES} bytes (it is {len(key)}); "
            "a short key lets pseudonyms be guessed back to user ids"
        )
    return None


@dataclass(frozen=True, slots=True)
class ProviderUserIds:
    #: The server secret; empty: calls carry no user id.
    key: bytes = field(default=b"", repr=False)

    @property
    def enabled(self) -> bool:
        return bool(self.key)

    def of(self, user_id: str) -> str:
        """``user_id``'s pseudonym (43 characters), or "" when switched off."""
        if not self.key:
            return ""
        digest = hmac.new(self.key, user_id.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

"""Credentials taken out of text that came from outside: a provider's error message may quote the
request it refused, API key included, and such text is stored (``internalErrorMessage``) and shown
to operators. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["REDACTED", "scrub_secrets"]

REDACTED = "[redacted]"
#: Shortest secret replaced verbatim: a shorter "key" would blank ordinary words.
MIN_SECRET_CHARS = 8

_KEY_LIKE = re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{8,}")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}")
_NAMED = re.compile(
    r"(?i)\b(api[_-]?key|x-api-key|authorization|access[_-]?token|secret|password)"
    r"""(["']?\s*[:=]\s*["']?)([^\s"',;}]{4,})"""
)


def scrub_secrets(text: str, known: Iterable[str] = ()) -> str:
    """``text`` with every secret in ``known`` and anything shaped like a credential (``sk-…``
    keys, bearer tokens, ``api_key=…`` values) replaced by :data:`REDACTED`."""
    for secret in known:
        if len(secret) >= MIN_SECRET_CHARS:
            text = text.replace(secret, REDACTED)
    text = _KEY_LIKE.sub(REDACTED, text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    return _NAMED.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)

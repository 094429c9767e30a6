"""Where the server's tokens come from: settings, or development tokens on loopback."""

from __future__ import annotations

import json
import logging
import os
import secrets
from pathlib import Path

from scheduler_service.api.auth import Role, TokenSet
from scheduler_service.core.errors import ConfigurationError
from scheduler_service.wiring.settings import SchedulerSettings

__all__ = ["ConfigurationError", "is_loopback", "load_tokens"]

from shared.config import is_loopback

log = logging.getLogger(__name__)


def load_tokens(settings: SchedulerSettings) -> TokenSet:
    configured = {
        Role.RUNTIME: [t.get_secret_value() for t in settings.runtime_tokens],
        Role.SERVICE: [t.get_secret_value() for t in settings.service_tokens],
        Role.ADMIN: [t.get_secret_value() for t in settings.admin_tokens],
        Role.VIEWER: [t.get_secret_value() for t in settings.viewer_tokens],
    }
    bound = [_binding(b.get_secret_value()) for b in settings.runtime_identities]
    if any(configured.values()) or bound:
        return TokenSet(configured, bound)
    if not is_loopback(settings.listen):
        raise ConfigurationError(
            f"refusing to listen on {settings.listen} without tokens: set AIJOB_RUNTIME_TOKENS, "
            "AIJOB_SERVICE_TOKENS and AIJOB_ADMIN_TOKENS"
        )
    path = Path(settings.dev_tokens_file).resolve()
    tokens = _read_or_create(path)
    log.warning(
        "no tokens configured: using development tokens from %s (readable by this user only)",
        path,
        extra={"action": "dev_tokens", "path": str(path)},
    )
    # Named, so that the audit log says who acted ("dev-admin"), as a named setting would.
    return TokenSet({role: [f"dev-{role.value}={tokens[role.value]}"] for role in Role})


def _binding(entry: str) -> tuple[str, str]:
    prefix, sep, token = entry.partition("=")
    if not sep or not prefix or not token:
        # The entry holds a secret: the message must not echo it.
        raise ConfigurationError(
            "each AIJOB_RUNTIME_IDENTITIES entry must be <instance-id prefix>=<token>"
        )
    return prefix, token


def _read_or_create(path: Path) -> dict[str, str]:
    try:
        existing = json.loads(path.read_text())
        if all(isinstance(existing.get(role.value), str) for role in Role):
            return {role.value: existing[role.value] for role in Role}
    except (OSError, ValueError):
        pass
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tokens = {role.value: f"dev-{role.value}-{secrets.token_urlsafe(24)}" for role in Role}
    # Created with owner-only permissions from the start, never widened.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(tokens, handle, indent=2)
    os.chmod(path, 0o600)
    return tokens

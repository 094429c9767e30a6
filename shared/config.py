"""Helpers every process of the pair shares: comma lists in settings, development tokens, channels.

Both services and the ``aijob`` CLI read the same ``AIJOB_*`` environment; these keep the three
readings of it identical.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import grpc

__all__ = ["DEV_TOKENS_FILE", "client_channel", "comma_list", "dev_token", "split_commas"]

#: Where a scheduler on loopback without configured tokens writes its development tokens.
DEV_TOKENS_FILE = ".aijob/dev-tokens.json"


def split_commas(value: str) -> list[str]:
    """``"a, b,"`` → ``["a", "b"]``."""
    return [item.strip() for item in value.split(",") if item.strip()]


def comma_list(value: object) -> object:
    """A pydantic ``mode="before"`` validator body: a comma-separated string becomes a list;
    anything else passes through to the field's own validation."""
    return split_commas(value) if isinstance(value, str) else value


def dev_token(path: str | Path, role: str) -> str | None:
    """The development token of ``role`` from the scheduler's tokens file, if there is one."""
    try:
        value = json.loads(Path(path).read_text())[role]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return str(value)


def client_channel(
    address: str,
    *,
    ca: str = "",
    client_cert: str = "",
    client_key: str = "",
    options: Sequence[tuple[str, int]] = (),
) -> grpc.aio.Channel:
    """A channel to the scheduler: TLS when a CA or a client certificate is given (mutual TLS
    with both), plaintext otherwise."""
    if ca or client_cert:
        credentials = grpc.ssl_channel_credentials(
            Path(ca).read_bytes() if ca else None,
            Path(client_key).read_bytes() if client_key else None,
            Path(client_cert).read_bytes() if client_cert else None,
        )
        return grpc.aio.secure_channel(address, credentials, options=list(options))
    return grpc.aio.insecure_channel(address, options=list(options))

"""Helpers every process of the pair shares: comma lists in settings, development tokens, channels.

Both services and the ``aijob`` CLI read the same ``AIJOB_*`` environment; these keep the three
readings of it identical.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Sequence
from pathlib import Path

import grpc

__all__ = [
    "DEV_TOKENS_FILE",
    "client_channel",
    "comma_list",
    "dev_token",
    "named_token",
    "pattern_list",
    "split_commas",
    "split_patterns",
]

#: Where a scheduler on loopback without configured tokens writes its development tokens.
DEV_TOKENS_FILE = ".aijob/dev-tokens.json"


def is_loopback(listen: str) -> bool:
    """Whether ``listen`` (host:port) is an address only this machine reaches."""
    host = listen.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_commas(value: str) -> list[str]:
    """``"a, b,"`` → ``["a", "b"]``."""
    return [item.strip() for item in value.split(",") if item.strip()]


_OPENERS = {"(": ")", "[": "]", "{": "}"}


def split_patterns(value: str) -> list[str]:
    """Regular expressions separated by commas — but not the commas inside a pattern's
    ``{1,3}``, ``[,;]`` or ``(a,b)``, nor an escaped ``\\,``: ``"a{1,3}, b"`` is two patterns."""
    patterns: list[str] = []
    current: list[str] = []
    closers: list[str] = []
    escaped = False
    for char in value:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            current.append(char)
            escaped = True
        elif char == "," and not closers:
            patterns.append("".join(current))
            current = []
        else:
            if closers and char == closers[-1]:
                closers.pop()
            elif char in _OPENERS and not (closers and closers[-1] == "]"):
                closers.append(_OPENERS[char])
            current.append(char)
    patterns.append("".join(current))
    return [p.strip() for p in patterns if p.strip()]


def pattern_list(value: object) -> object:
    """:func:`comma_list` for settings that hold regular expressions."""
    return split_patterns(value) if isinstance(value, str) else value


def comma_list(value: object) -> object:
    """A pydantic ``mode="before"`` validator body: a comma-separated string becomes a list;
    anything else passes through to the field's own validation."""
    return split_commas(value) if isinstance(value, str) else value


#: A token's name: ``name=token`` in a token setting (a token of 16 characters or more after the
#: ``=``, so that a base64 token ending in ``=`` is never read as named).
_NAMED = re.compile(r"^([a-z][a-z0-9_.-]{0,63})=(.{16,})$", re.DOTALL)


def named_token(entry: str) -> tuple[str, str]:
    """(name, token) of a token setting's entry; an unnamed token gets an empty name."""
    match = _NAMED.match(entry)
    return (match.group(1), match.group(2)) if match else ("", entry)


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

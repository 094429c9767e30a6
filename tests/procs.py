"""Helpers for tests that run the services as child processes."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback port that was free a moment ago (the child binds it right after)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])

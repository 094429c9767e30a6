"""``aijob console``: the console's web server (aiohttp), on ``AIJOB_CONSOLE_LISTEN``.

One admin-API client per signed-in token (a few operators: kept, the least recently used
closed past :data:`MOST_CLIENTS`), all to the scheduler ``AIJOB_SCHEDULER_ADDR`` names, over
TLS with ``AIJOB_TLS_CA``. Calls have a 10 s deadline: a page waits no longer for a scheduler
that does not answer."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import signal
import ssl
import sys
from collections import OrderedDict
from importlib import resources

from aiohttp import web

from aijob.client import AdminClient
from aijob.connection import ClientSettings
from aijob.console.render import Renderer
from aijob.console.session import Guard, security_headers
from aijob.console.views import Views
from shared.config import is_loopback

__all__ = ["ConsoleSetupError", "main", "make_app", "serve", "tls_context"]

log = logging.getLogger(__name__)

MOST_CLIENTS = 32
CALL_TIMEOUT_S = 10.0


class Clients:
    def __init__(self, settings: ClientSettings) -> None:
        self._settings = settings
        self._clients: OrderedDict[str, AdminClient] = OrderedDict()
        self._closing: set[asyncio.Task[None]] = set()

    def __call__(self, token: str) -> AdminClient:
        key = hashlib.sha256(token.encode()).hexdigest()
        client = self._clients.get(key)
        if client is None:
            client = AdminClient(token=token, settings=self._settings, timeout_s=CALL_TIMEOUT_S)
            self._clients[key] = client
            while len(self._clients) > MOST_CLIENTS:
                _, old = self._clients.popitem(last=False)
                task = asyncio.ensure_future(old.close())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
        self._clients.move_to_end(key)
        return client

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()


class ConsoleSetupError(RuntimeError):
    """The console's settings would serve it unsafely; the message says what to set."""


def make_app(settings: ClientSettings | None = None) -> web.Application:
    settings = settings or ClientSettings()
    guard = Guard(trust_proxy=settings.console_trust_proxy)
    clients = Clients(settings)
    app = web.Application(middlewares=[security_headers, guard.middleware])
    app.add_routes(Views(clients, Renderer(), guard).routes())
    static = resources.files("aijob.console") / "static"
    app.router.add_static("/static", str(static), append_version=False)

    async def close_clients(_app: web.Application) -> None:
        await clients.close()

    app.on_cleanup.append(close_clients)
    return app


def tls_context(settings: ClientSettings) -> ssl.SSLContext | None:
    """The console's TLS, or None for plain HTTP; refuses plain HTTP on an address other than
    loopback unless a TLS proxy is in front or it is asked for explicitly."""
    if settings.console_tls_cert or settings.console_tls_key:
        if not (settings.console_tls_cert and settings.console_tls_key):
            raise ConsoleSetupError("set both AIJOB_CONSOLE_TLS_CERT and AIJOB_CONSOLE_TLS_KEY")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(settings.console_tls_cert, settings.console_tls_key)
        return context
    host = settings.console_listen.rpartition(":")[0].strip("[]") or "127.0.0.1"
    if is_loopback(f"{host}:0") or settings.console_trust_proxy:
        return None
    if not settings.console_allow_plain_http:
        raise ConsoleSetupError(
            f"the console would serve plain HTTP on {host}, so its session cookie would cross"
            " the network in clear: set AIJOB_CONSOLE_TLS_CERT and AIJOB_CONSOLE_TLS_KEY, or"
            " AIJOB_CONSOLE_TRUST_PROXY=1 behind a TLS proxy, or AIJOB_CONSOLE_ALLOW_PLAIN_HTTP=1"
        )
    log.warning(
        "the console serves plain HTTP on an address other than loopback",
        extra={"action": "console_plain_http", "listen": settings.console_listen},
    )
    return None


def main(listen: str | None = None) -> int:
    """``aijob console [--listen HOST:PORT]``: serve, or say in one line why not (settings
    that would serve it unsafely, an address it cannot listen on)."""
    settings = ClientSettings()
    if listen:
        if not listen.rpartition(":")[2].isdigit():
            print(f"aijob console: --listen wants HOST:PORT, not {listen!r}", file=sys.stderr)
            return 2
        settings = settings.model_copy(update={"console_listen": listen})
    try:
        asyncio.run(serve(settings))
    except ConsoleSetupError as error:
        print(f"aijob console: {error}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        print(
            f"aijob console: cannot listen on {settings.console_listen}: {reason}", file=sys.stderr
        )
        return 2
    return 0


async def serve(settings: ClientSettings | None = None) -> None:
    """Serve until SIGINT or SIGTERM."""
    settings = settings or ClientSettings()
    context = tls_context(settings)
    host, _, port = settings.console_listen.rpartition(":")
    runner = web.AppRunner(make_app(settings), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host.strip("[]") or "127.0.0.1", int(port), ssl_context=context)
    await site.start()
    scheme = "http" if context is None else "https"
    print(f"console at {scheme}://{settings.console_listen}/", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()

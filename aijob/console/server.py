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
from collections import OrderedDict
from importlib import resources

from aiohttp import web

from aijob.client import AdminClient
from aijob.connection import ClientSettings
from aijob.console.render import Renderer
from aijob.console.session import Guard, security_headers
from aijob.console.views import Views

__all__ = ["make_app", "serve"]

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


def make_app(settings: ClientSettings | None = None) -> web.Application:
    settings = settings or ClientSettings()
    guard = Guard()
    clients = Clients(settings)
    app = web.Application(middlewares=[security_headers, guard.middleware])
    app.add_routes(Views(clients, Renderer(), guard).routes())
    static = resources.files("aijob.console") / "static"
    app.router.add_static("/static", str(static), append_version=False)

    async def close_clients(_app: web.Application) -> None:
        await clients.close()

    app.on_cleanup.append(close_clients)
    return app


async def serve(settings: ClientSettings | None = None) -> None:
    """Serve until SIGINT or SIGTERM."""
    settings = settings or ClientSettings()
    host, _, port = settings.console_listen.rpartition(":")
    runner = web.AppRunner(make_app(settings), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host or "127.0.0.1", int(port))
    await site.start()
    print(f"console at http://{settings.console_listen}/", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()

"""``python -m runtime_service``: lease jobs from a scheduler and run them against the model."""

from __future__ import annotations

import asyncio
import signal
import sys

from prometheus_client import start_http_server

from runtime_service.settings import RuntimeSettings
from runtime_service.worker import Runtime
from shared import tracing
from shared.gc_tuning import settle_start_up_heap
from shared.logs import configure_logging


async def _serve(settings: RuntimeSettings) -> None:
    runtime = Runtime(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await runtime.run(stop)


def main() -> int:
    settings = RuntimeSettings()
    configure_logging("runtime", runtimeId=settings.runtime_instance_id)
    if settings.metrics_listen:
        host, _, port = settings.metrics_listen.rpartition(":")
        start_http_server(int(port), addr=host or "127.0.0.1")
    tracing.setup_from_env("aijob-runtime")
    settle_start_up_heap()
    try:
        asyncio.run(_serve(settings))
    finally:
        tracing.shutdown()  # the last spans leave before the process does
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m runtime_service``: lease jobs from a scheduler and run them against the model."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from runtime_service.settings import RuntimeSettings
from runtime_service.worker import Runtime


async def _serve(settings: RuntimeSettings) -> None:
    runtime = Runtime(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await runtime.run(stop)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for noisy in (
        "httpx",
        "httpx2",
        "openai",
    ):  # request lines at INFO add nothing an operator needs
        logging.getLogger(noisy).setLevel(logging.WARNING)
    asyncio.run(_serve(RuntimeSettings()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

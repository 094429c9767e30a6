"""``python -m scheduler_service [serve]`` serves gRPC; ``python -m scheduler_service migrate``
brings the database to the newest schema."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from pydantic import ValidationError

from scheduler_service.errors import ConfigurationError
from scheduler_service.settings import SchedulerSettings
from shared import tracing
from shared.logs import configure_logging


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scheduler_service", description=__doc__)
    parser.add_argument("command", nargs="?", default="serve", choices=["serve", "migrate"])
    args = parser.parse_args(argv)
    configure_logging("scheduler")
    try:
        return _run(args.command)
    except (ConfigurationError, ValidationError) as exc:
        # A start that cannot work says why in one line, not with a traceback.
        summary = " ".join(str(exc).split())
        print(f"scheduler: cannot start: {summary}", file=sys.stderr)
        return 2


def _run(command: str) -> int:
    settings = SchedulerSettings()
    if command == "migrate":
        from scheduler_service.migrate import migrate

        asyncio.run(migrate(settings.database_url))
        logging.getLogger("scheduler_service").info("database is at the newest schema")
        return 0
    if settings.workers > 1:
        from scheduler_service.workers import run_workers

        return run_workers(settings)
    from scheduler_service.api.server import serve

    tracing.setup_from_env("aijob-scheduler")
    try:
        asyncio.run(serve(settings))
    finally:
        tracing.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

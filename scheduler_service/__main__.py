"""``python -m scheduler_service [serve]`` serves gRPC; ``python -m scheduler_service migrate``
brings the database to the newest schema; ``python -m scheduler_service contract [--check]
[--quiet-days N]`` drops the legacy system's columns and tables once nothing needs them
(docs/operations/legacy-migration.md)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from datetime import datetime

from pydantic import ValidationError

from scheduler_service.core.errors import ConfigurationError
from scheduler_service.wiring.settings import SchedulerSettings
from shared import tracing
from shared.gc_tuning import settle_start_up_heap
from shared.logs import configure_logging


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scheduler_service", description=__doc__)
    parser.add_argument(
        "command", nargs="?", default="serve", choices=["serve", "migrate", "contract"]
    )
    parser.add_argument(
        "--check", action="store_true", help="contract: say what blocks it, change nothing"
    )
    parser.add_argument(
        "--quiet-days",
        type=int,
        default=7,
        help="contract: days without a legacy write it requires (default 7)",
    )
    parser.add_argument(
        "--as-of",
        type=datetime.fromisoformat,
        default=None,
        help="contract: judge the quiet period at this UTC time instead of the database's now",
    )
    args = parser.parse_args(argv)
    configure_logging("scheduler")
    try:
        if args.command == "contract":
            return _contract(args)
        return _run(args.command)
    except (ConfigurationError, ValidationError) as exc:
        # A start that cannot work says why in one line, not with a traceback.
        summary = " ".join(str(exc).split())
        print(f"scheduler: cannot start: {summary}", file=sys.stderr)
        return 2


def _contract(args: argparse.Namespace) -> int:
    from scheduler_service.sql.legacy_contract import contract

    settings = SchedulerSettings()
    code, lines = asyncio.run(
        contract(
            settings.database_url,
            check=args.check,
            quiet_days=args.quiet_days,
            as_of=args.as_of,
        )
    )
    print("\n".join(lines))
    return code


def _run(command: str) -> int:
    settings = SchedulerSettings()
    if command == "migrate":
        from scheduler_service.sql.migrate import migrate

        asyncio.run(migrate(settings.database_url))
        logging.getLogger("scheduler_service").info("database is at the newest schema")
        return 0
    if settings.workers > 1:
        from scheduler_service.workers import run_workers

        return run_workers(settings)
    from scheduler_service.api.server import serve

    tracing.setup_from_env("aijob-scheduler")
    settle_start_up_heap()
    try:
        asyncio.run(serve(settings))
    finally:
        tracing.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

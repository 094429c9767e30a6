"""The ``aijob`` command (its help, with the exit codes: :data:`aijob.cli.exit_codes.HELP`)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable

from aijob.cli.commands import Cli
from aijob.cli.exit_codes import EXIT_AUTH, EXIT_OF_STATUS, EXIT_OTHER
from aijob.cli.parser import build_parser
from aijob.client import AijobError
from aijob.connection import ClientSettings, MissingTokenError

__all__ = ["main"]


async def _run(args: argparse.Namespace) -> int:
    cli = Cli(args, ClientSettings())
    try:
        handlers: dict[str, Callable[[], Awaitable[int]]] = {
            "create": cli.create,
            "create-many": cli.create_many,
            "get": cli.get,
            "tree": cli.tree,
            "types": cli.types,
            "watch": cli.watch,
            "cancel": cli.cancel,
            "list": cli.list,
            "credential": cli.credential,
            "admin": cli.admin_command,
        }
        return await handlers[args.command]()
    finally:
        await cli.close()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "console":
        from aijob.console.server import main as console  # the web server only for this

        return console(args.listen)
    try:
        return asyncio.run(_run(args))
    except MissingTokenError as error:
        print(f"aijob: {error}", file=sys.stderr)
        return EXIT_AUTH
    except AijobError as error:
        print(f"aijob: {error}", file=sys.stderr)
        return EXIT_OF_STATUS.get(error.code, EXIT_OTHER)
    except KeyboardInterrupt:
        return EXIT_OTHER

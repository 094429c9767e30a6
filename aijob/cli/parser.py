"""The ``aijob`` command line: its commands, their arguments and the global flags."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from aijob.cli.commands import COST_POLICIES, JOIN_POLICIES, REASONING
from aijob.cli.exit_codes import HELP
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb


def json_arg(text: str) -> dict[str, Any]:
    """A JSON object given inline or as ``@file``; a missing file or bad JSON is a usage error
    that says where (argparse prints it and exits 2), never a traceback."""
    source = text[1:] if text.startswith("@") else "the argument"
    try:
        raw = Path(source).read_text() if text.startswith("@") else text
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot read {source}: {error.strerror}") from None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(
            f"{source} is not JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{source} is not a JSON object")
    return value


def tier_arg(text: str) -> admin_pb.ModelTier:
    """A route's tier as ``provider/model``."""
    provider, sep, model = text.partition("/")
    if not sep or not provider.strip() or not model.strip():
        raise argparse.ArgumentTypeError(f"a tier is provider/model, got {text!r}")
    return admin_pb.ModelTier(provider=provider.strip(), model=model.strip())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aijob", description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="print JSON (for scripts)")
    parser.add_argument("--user", help="the user to act for (default AIJOB_USER_ID or cli-user)")
    commands = parser.add_subparsers(dest="command", required=True)

    create = commands.add_parser("create", help="create a job")
    create.add_argument("job_type")
    create.add_argument("--snapshot", type=json_arg, default={}, help="JSON object, or @file")
    create.add_argument("--params", type=json_arg, default={}, help="JSON object, or @file")
    create.add_argument("--idempotency-key", default="")
    create.add_argument("--priority", type=int)
    create.add_argument(
        "--model", default="", help="a model the job type allows instead of its default"
    )
    create.add_argument(
        "--credential-id",
        default="",
        help="run on your stored model key (aijob credential list) instead of the platform's",
    )
    create.add_argument("--target-type", default="")
    create.add_argument("--target-id", default="")
    create.add_argument(
        "--cost-policy",
        choices=sorted(COST_POLICIES),
        default="",
        help="off_peak waits for the provider's cheap hours (default: the job type's)",
    )
    create.add_argument("--parent", default="", help="make the job a child of this job of yours")
    create.add_argument(
        "--max-parallel", type=int, default=0, help="as a parent: children running at once"
    )
    create.add_argument(
        "--join-policy",
        choices=sorted(JOIN_POLICIES),
        default="",
        help="as a parent: all_success (default) or all_done",
    )
    create.add_argument(
        "--reasoning",
        choices=list(REASONING),
        default="",
        help="how much the model thinks first (default: the job type's, in ListJobTypes)",
    )
    many = commands.add_parser(
        "create-many",
        help="create the jobs of a JSON-lines file (one CreateJobRequest per line, in its JSON "
        'form, with an optional "user_id"), in calls of --batch jobs',
    )
    many.add_argument("file", type=Path)
    many.add_argument("--batch", type=int, default=100, help="jobs per CreateJobs call (1-500)")
    for name in ("get", "cancel"):
        commands.add_parser(name, help=f"{name} a job").add_argument("job_id")
    commands.add_parser(
        "tree", help="a job's tree: every node's status and attempts, and the whole tree's cost"
    ).add_argument("job_id")
    commands.add_parser(
        "types", help="the job types: queue, models a create may name, reasoning efforts"
    )
    watching = commands.add_parser("watch", help="watch a job until it ends")
    watching.add_argument("job_id")
    watching.add_argument(
        "--output",
        action="store_true",
        help="print the text the job's model call writes, as it is written (StreamOutput)",
    )
    listing = commands.add_parser("list", help="list your jobs, newest first")
    listing.add_argument("--type", default="")
    listing.add_argument("--status", default="")
    listing.add_argument("--page-size", type=int, default=20)
    listing.add_argument("--page-token", default="")
    listing.add_argument("--parent", default="", help="only the children of this job")

    _credential_commands(commands)
    _admin_commands(commands)
    console = commands.add_parser(
        "console",
        help="serve the operators' console in the browser; sign in with an admin or viewer token",
    )
    console.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="where to serve it (default AIJOB_CONSOLE_LISTEN, else 127.0.0.1:8088)",
    )
    _global_flags_after(parser)
    return parser


def _global_flags_after(parser: argparse.ArgumentParser) -> None:
    """``--json`` and ``--user`` after the command too (``aijob get ID --json``): given there,
    they set the same value as before it; absent, they leave it as it is."""
    for action in parser._actions:  # argparse keeps its subcommands nowhere public
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                command.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
                command.add_argument("--user", default=argparse.SUPPRESS)
                _global_flags_after(command)


def _credential_commands(commands: Any) -> None:
    credential = commands.add_parser("credential", help="your stored model API keys")
    credential_commands = credential.add_subparsers(dest="credential_command", required=True)
    put = credential_commands.add_parser(
        "put", help="store a model API key, read from standard input (never from the command line)"
    )
    put.add_argument("provider", nargs="?", default="deepseek")
    put.add_argument("--label", default="")
    credential_commands.add_parser("list", help="list your stored keys, masked")
    credential_commands.add_parser("delete", help="delete a stored key").add_argument(
        "credential_id"
    )


def _admin_commands(commands: Any) -> None:
    admin = commands.add_parser("admin", help="operators' commands (admin token)")
    admin_commands = admin.add_subparsers(dest="admin_command", required=True)
    admin_list = admin_commands.add_parser("list", help="list all jobs")
    for flag in ("--user-id", "--type", "--status", "--queue", "--page-token"):
        admin_list.add_argument(flag, default="")
    admin_list.add_argument("--page-size", type=int, default=20)
    admin_commands.add_parser("retry", help="run a failed or cancelled job again").add_argument(
        "job_id"
    )
    admin_commands.add_parser("stats", help="queue depth, ages and outbox health")
    audit = admin_commands.add_parser("audit", help="the audit log of admin actions, newest first")
    audit.add_argument("--page-size", type=int, default=20)
    audit.add_argument("--page-token", default="")
    adopt = admin_commands.add_parser(
        "adopt-legacy", help="hand a legacy job type (active-recall, feynman-evaluation) over"
    )
    adopt.add_argument("job_type")
    adopt.add_argument("--dry-run", action="store_true", help="count, change nothing")
    admin_commands.add_parser("redrive", help="send dead outbox events again").add_argument(
        "event_ids", nargs="*"
    )
    limit = admin_commands.add_parser(
        "model-limit",
        help="set a model key's limits; a limit not given keeps its value, 0 takes the "
        "scheduler's default",
    )
    limit.add_argument("provider")
    limit.add_argument("model")
    limit.add_argument("--scope", default="platform", choices=("platform", "user"))
    limit.add_argument("--concurrency", type=int, help="calls at once")
    limit.add_argument("--rpm", type=int, help="requests per minute")
    limit.add_argument("--tpm", type=int, help="tokens per minute")
    limit.add_argument("--per-user", type=int, help="one user's calls at once")
    limit.add_argument("--daily-cost-micros", type=int, help="the key's cost per UTC day")
    admin_commands.add_parser("model-limits", help="list the model keys' limits")
    route = admin_commands.add_parser(
        "model-route",
        help="a job type's model route; given tiers (provider/model, primary first), set it",
    )
    route.add_argument("job_type")
    route.add_argument("tiers", nargs="*", type=tier_arg, metavar="PROVIDER/MODEL")
    route.add_argument(
        "--clear",
        action="store_true",
        help="remove the operator's route: the settings' route or the job type's model applies",
    )
    reset = admin_commands.add_parser(
        "reset-breaker",
        help="close a model key's circuit breaker (a 402 keeps it open until this)",
    )
    reset.add_argument("provider")
    reset.add_argument("model")
    reset.add_argument("--credential-id", default="", help="a user's key; default the platform's")
    budget = admin_commands.add_parser("budget", help="set a user's daily budget (0: no limit)")
    budget.add_argument("user_id")
    budget.add_argument("--tokens", type=int, default=0, help="tokens per UTC day")
    budget.add_argument("--cost-micros", type=int, default=0, help="cost per UTC day, micro-units")
    usage = admin_commands.add_parser("usage", help="a user's model usage, per model key")
    usage.add_argument("user_id")
    usage.add_argument("--from", dest="from_date", default="", help="first UTC day (today)")
    usage.add_argument("--to", dest="to_date", default="", help="last UTC day (today)")
    admin_commands.add_parser(
        "reencrypt-credentials", help="move every stored user key under the newest credential key"
    )

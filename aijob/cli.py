"""``aijob``: create, inspect, watch and cancel jobs, and the admin views, from a terminal.

Exit codes scripts can switch on:

    0  ok (watch: the job succeeded)     4  not found
    1  watch: the job failed             5  refused: bad input or wrong state (see the message)
    2  usage error                       6  authentication / permission
    3  watch: the job was cancelled      7  scheduler unreachable or unavailable; 8 other errors
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

from aijob.client import AdminClient, AijobError, JobsClient
from aijob.connection import ClientSettings, MissingTokenError
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import types_pb2

__all__ = ["main"]

EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED, EXIT_NOT_FOUND, EXIT_REFUSED = 1, 2, 3, 4, 5
EXIT_AUTH, EXIT_UNAVAILABLE, EXIT_OTHER = 6, 7, 8
_EXIT_OF_STATUS = {
    grpc.StatusCode.NOT_FOUND: EXIT_NOT_FOUND,
    grpc.StatusCode.INVALID_ARGUMENT: EXIT_REFUSED,
    grpc.StatusCode.FAILED_PRECONDITION: EXIT_REFUSED,
    grpc.StatusCode.ALREADY_EXISTS: EXIT_REFUSED,
    grpc.StatusCode.RESOURCE_EXHAUSTED: EXIT_REFUSED,
    grpc.StatusCode.UNAUTHENTICATED: EXIT_AUTH,
    grpc.StatusCode.PERMISSION_DENIED: EXIT_AUTH,
    grpc.StatusCode.UNAVAILABLE: EXIT_UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: EXIT_UNAVAILABLE,
}
_EXIT_OF_TERMINAL = {"succeeded": 0, "failed": EXIT_FAILED, "cancelled": EXIT_CANCELLED}
TIMEOUT_S = 30
#: aijob create --cost-policy
_COST_POLICIES = {
    "immediate": types_pb2.COST_POLICY_IMMEDIATE,
    "off_peak": types_pb2.COST_POLICY_OFF_PEAK,
}


def _json_arg(text: str) -> dict[str, Any]:
    raw = Path(text[1:]).read_text() if text.startswith("@") else text
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aijob", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="print JSON (for scripts)")
    parser.add_argument("--user", help="the user to act for (default AIJOB_USER_ID or cli-user)")
    commands = parser.add_subparsers(dest="command", required=True)

    create = commands.add_parser("create", help="create a job")
    create.add_argument("job_type")
    create.add_argument("--snapshot", type=_json_arg, default={}, help="JSON object, or @file")
    create.add_argument("--params", type=_json_arg, default={}, help="JSON object, or @file")
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
        choices=sorted(_COST_POLICIES),
        default="",
        help="off_peak waits for the provider's cheap hours (default: the job type's)",
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

    _credential_commands(commands)
    _admin_commands(commands)
    commands.add_parser(
        "console",
        help="serve the operators' console in the browser (AIJOB_CONSOLE_LISTEN, "
        "default 127.0.0.1:8088); sign in with an admin or viewer token",
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
        "adopt-legacy", help="hand a System A job type (active-recall, feynman-evaluation) over"
    )
    adopt.add_argument("job_type")
    adopt.add_argument("--dry-run", action="store_true", help="count, change nothing")
    admin_commands.add_parser("redrive", help="send dead outbox events again").add_argument(
        "event_ids", nargs="*"
    )
    limit = admin_commands.add_parser(
        "model-limit", help="set a model key's limits (0 takes the scheduler's default)"
    )
    limit.add_argument("provider")
    limit.add_argument("model")
    limit.add_argument("--scope", default="platform", choices=("platform", "user"))
    limit.add_argument("--concurrency", type=int, default=0)
    limit.add_argument("--rpm", type=int, default=0, help="requests per minute")
    limit.add_argument("--tpm", type=int, default=0, help="tokens per minute")
    admin_commands.add_parser("model-limits", help="list the model keys' limits")
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


def _print(message: Message, as_json: bool, human: Callable[[Any], str]) -> None:
    if as_json:
        print(json_format.MessageToJson(message, indent=2, preserving_proto_field_name=False))
    else:
        print(human(message))


def _job_line(job: types_pb2.Job) -> str:
    line = (
        f"{job.job_id}  {job.job_type:<24} {job.lifecycle_status:<9} "
        f"attempt {job.attempt_count}/{job.max_attempts}  progress {job.progress}%"
    )
    if job.error_code:
        line += f"  {job.error_code}: {job.public_error_message}"
    return line


def _job_details(job: types_pb2.Job) -> str:
    lines = [_job_line(job)]
    if job.HasField("deferred_until"):
        lines.append(f"  waits for the cheap hours until {job.deferred_until.ToDatetime()} UTC")
    if job.HasField("result"):
        kinds = ", ".join(sorted({a.artifact_type for a in job.result.artifacts}))
        lines.append(f"  artifacts: {job.result.artifact_count} ({kinds})")
        if job.result.output_json:
            lines.append(
                "  output: "
                + json.dumps(
                    json.loads(job.result.output_json), indent=2, ensure_ascii=False
                ).replace("\n", "\n  ")
            )
    return "\n".join(lines)


class Cli:
    """Each command on the public client (aijob.client): its deadlines, retries through a
    scheduler restart and error classes. A client is made on first use, so a command needs only
    the token of the API it calls."""

    def __init__(self, args: argparse.Namespace, settings: ClientSettings) -> None:
        self.args = args
        self.settings = settings

    @functools.cached_property
    def jobs(self) -> JobsClient:
        user = self.args.user or self.settings.user_id
        return JobsClient(settings=self.settings, user_id=user, timeout_s=TIMEOUT_S)

    @functools.cached_property
    def admin(self) -> AdminClient:
        return AdminClient(settings=self.settings, timeout_s=TIMEOUT_S)

    async def close(self) -> None:
        for name in ("jobs", "admin"):
            client = self.__dict__.get(name)
            if client is not None:
                await client.close()

    async def create(self) -> int:
        a = self.args
        request = job_pb.CreateJobRequest(
            job_type=a.job_type,
            # Made here when not given: a create the client repeats is then still one job.
            idempotency_key=a.idempotency_key or str(uuid.uuid4()),
            target_type=a.target_type,
            target_id=a.target_id,
            model=a.model,
            cost_policy=_COST_POLICIES.get(a.cost_policy, types_pb2.COST_POLICY_UNSPECIFIED),
            credential_id=a.credential_id,
            credential_mode="user_deepseek_key" if a.credential_id else "",
        )
        json_format.ParseDict(a.snapshot, request.snapshot)
        json_format.ParseDict(a.params, request.params)
        if a.priority is not None:
            request.priority = a.priority
        reply = await self.jobs.call("CreateJob", request)
        _print(
            reply, a.json, lambda r: ("created " if r.created else "existing ") + _job_line(r.job)
        )
        return 0

    async def create_many(self) -> int:
        """Exit 0 when every line made (or found) its job; else 5, with each failure on stderr."""
        a = self.args
        if not 1 <= a.batch <= MAX_BATCH:
            print(f"aijob: --batch must be 1-{MAX_BATCH}", file=sys.stderr)
            return EXIT_USAGE
        lines = [line for line in a.file.read_text().splitlines() if line.strip()]
        progress = _Progress(len(lines))
        failures: list[str] = []
        results: list[dict[str, Any]] = []
        for start in range(0, len(lines), a.batch):
            items: dict[int, job_pb.CreateJobsItem] = {}
            for number in range(start, min(start + a.batch, len(lines))):
                try:
                    items[number] = _item_of(lines[number])
                except (ValueError, json_format.ParseError) as error:
                    failures.append(f"line {number + 1}: not a CreateJobRequest: {error}")
            reply = await self.jobs.call(
                "CreateJobs",
                job_pb.CreateJobsRequest(items=list(items.values())),
                timeout_s=TIMEOUT_S * 4,
            )
            for number, result in zip(items, reply.results, strict=True):
                if result.status.code:
                    failures.append(f"line {number + 1}: {_status_text(result.status)}")
                results.append(json_format.MessageToDict(result) | {"line": number + 1})
            progress.advance(min(a.batch, len(lines) - start), len(failures))
        progress.done()
        if a.json:
            print(json.dumps(results, indent=2))
        for failure in failures:
            print(f"aijob: {failure}", file=sys.stderr)
        print(
            f"{len(lines) - len(failures)} created or found, {len(failures)} failed",
            file=sys.stderr,
        )
        return EXIT_REFUSED if failures else 0

    async def get(self) -> int:
        job = await self.jobs.call("GetJob", job_pb.GetJobRequest(job_id=self.args.job_id))
        _print(job, self.args.json, _job_details)
        return 0

    async def watch(self) -> int:
        if self.args.output:
            await self._stream_output()
        last: types_pb2.Job | None = None
        async for job in self.jobs.watch(self.args.job_id):
            last = job
            if self.args.json:
                print(json_format.MessageToJson(job, indent=None), flush=True)
            else:
                print(_job_line(job), flush=True)
        if last is None:
            return EXIT_OTHER
        if not self.args.json and last.HasField("result"):
            print(_job_details(last))
        return _EXIT_OF_TERMINAL.get(last.lifecycle_status, EXIT_OTHER)

    async def _stream_output(self) -> None:
        """The job's text as it is written; a new attempt's is marked and printed from its
        start (with --json, each chunk as a JSON line)."""
        attempt = 0
        async for chunk in self.jobs.stream_output(self.args.job_id):
            if self.args.json:
                print(json_format.MessageToJson(chunk, indent=None), flush=True)
                continue
            if attempt and chunk.attempt_no != attempt:
                print(f"\n[attempt {chunk.attempt_no}]", flush=True)
            attempt = chunk.attempt_no
            print(chunk.text, end="", flush=True)
        if attempt and not self.args.json:
            print(flush=True)

    async def cancel(self) -> int:
        reply = await self.jobs.call("CancelJob", job_pb.CancelJobRequest(job_id=self.args.job_id))
        _print(reply, self.args.json, lambda r: f"{r.outcome}: {_job_line(r.job)}")
        return 0

    async def list(self) -> int:
        a = self.args
        reply = await self.jobs.call(
            "ListJobs",
            job_pb.ListJobsRequest(
                job_type=a.type,
                lifecycle_status=a.status,
                page_size=a.page_size,
                page_token=a.page_token,
            ),
        )
        _print(reply, a.json, _page)
        return 0

    async def credential(self) -> int:
        a = self.args
        if a.credential_command == "put":
            api_key = sys.stdin.readline().strip()
            request = job_pb.PutUserCredentialRequest(
                provider=a.provider, api_key=api_key, label=a.label
            )
            stored = await self.jobs.call("PutUserCredential", request)
            _print(stored, a.json, lambda r: f"stored {r.credential_id}  {r.hint}")
        elif a.credential_command == "list":
            listed = await self.jobs.call(
                "ListUserCredentials", job_pb.ListUserCredentialsRequest()
            )
            _print(listed, a.json, _credentials)
        else:
            deleted = await self.jobs.call(
                "DeleteUserCredential",
                job_pb.DeleteUserCredentialRequest(credential_id=a.credential_id),
            )
            _print(deleted, a.json, lambda r: f"deleted {r.credential_id}")
        return 0

    async def admin_command(self) -> int:
        a = self.args
        if a.admin_command == "list":
            request = admin_pb.AdminListJobsRequest(
                user_id=a.user_id,
                job_type=a.type,
                lifecycle_status=a.status,
                queue_name=a.queue,
                page_size=a.page_size,
                page_token=a.page_token,
            )
            _print(
                await self.admin.call("ListJobs", request),
                a.json,
                _page,
            )
        elif a.admin_command == "retry":
            job = await self.admin.call("RetryJob", admin_pb.RetryJobRequest(job_id=a.job_id))
            _print(job, a.json, lambda j: f"retried as {_job_line(j)}")
        elif a.admin_command == "stats":
            stats = await self.admin.call("GetQueueStats", admin_pb.GetQueueStatsRequest())
            _print(stats, a.json, _stats)
        elif a.admin_command == "model-limit":
            put = admin_pb.PutModelLimitRequest(
                limit=admin_pb.ModelLimit(
                    provider=a.provider,
                    model=a.model,
                    credential_scope=a.scope,
                    max_concurrency=a.concurrency,
                    requests_per_minute=a.rpm,
                    tokens_per_minute=a.tpm,
                )
            )
            stored = await self.admin.call("PutModelLimit", put)
            _print(stored, a.json, lambda r: f"set {_limit_line(r.limit)}")
        elif a.admin_command == "model-limits":
            listed = await self.admin.call("ListModelLimits", admin_pb.ListModelLimitsRequest())
            _print(listed, a.json, lambda r: "\n".join(map(_limit_line, r.limits)) or "none set")
        elif a.admin_command == "budget":
            set_budget = admin_pb.PutUserBudgetRequest(
                user_id=a.user_id, daily_tokens=a.tokens, daily_cost_micros=a.cost_micros
            )
            stored_budget = await self.admin.call("PutUserBudget", set_budget)
            _print(stored_budget, a.json, _budget_line)
        elif a.admin_command == "usage":
            report = await self.admin.call(
                "GetUserUsage",
                admin_pb.GetUserUsageRequest(
                    user_id=a.user_id, from_date=a.from_date, to_date=a.to_date
                ),
            )
            _print(report, a.json, _usage_table)
        elif a.admin_command == "audit":
            entries = await self.admin.call(
                "ListAuditEntries",
                admin_pb.ListAuditEntriesRequest(page_size=a.page_size, page_token=a.page_token),
            )
            _print(entries, a.json, _audit_lines)
        elif a.admin_command == "adopt-legacy":
            adoption = await self.admin.call(
                "AdoptLegacyJobs",
                admin_pb.AdoptLegacyJobsRequest(job_type=a.job_type, dry_run=a.dry_run),
                timeout_s=TIMEOUT_S * 10,
            )
            verb = "would adopt" if a.dry_run else "adopted"
            _print(
                adoption,
                a.json,
                lambda r: f"{verb}: {r.adopted}, left to the legacy worker: {r.left_to_legacy}",
            )
        elif a.admin_command == "reencrypt-credentials":
            moved = await self.admin.call(
                "ReencryptCredentials",
                admin_pb.ReencryptCredentialsRequest(),
                timeout_s=TIMEOUT_S * 10,
            )
            _print(
                moved,
                a.json,
                lambda r: f"re-encrypted {r.reencrypted}, all under key {r.key_version}",
            )
        else:
            reply = await self.admin.call(
                "RedriveDeadEvents", admin_pb.RedriveDeadEventsRequest(event_ids=a.event_ids)
            )
            _print(reply, a.json, lambda r: f"redriven: {r.redriven}")
        return 0


def _budget_line(reply: admin_pb.PutUserBudgetResponse) -> str:
    tokens = reply.daily_tokens or "no limit"
    cost = reply.daily_cost_micros or "no limit"
    return f"{reply.user_id}: {tokens} tokens, {cost} cost micro-units per UTC day"


def _usage_table(report: admin_pb.GetUserUsageResponse) -> str:
    header = f"{'model key':<44} {'prompt':>10} {'cached':>10} {'completion':>10} "
    header += f"{'cost µ':>12} {'jobs':>6} {'attempts':>8}"
    rows = [f"usage {report.from_date} to {report.to_date}", header]
    for k in report.model_keys:
        name = f"{k.provider}/{k.model} ({k.credential_scope})"
        rows.append(
            f"{name:<44} {k.prompt_tokens:>10} {k.cached_prompt_tokens:>10} "
            f"{k.completion_tokens:>10} {k.cost_micros:>12} {k.jobs:>6} {k.attempts:>8}"
        )
    rows.append(
        f"{'total':<44} {report.prompt_tokens:>10} {report.cached_prompt_tokens:>10} "
        f"{report.completion_tokens:>10} {report.cost_micros:>12} {report.jobs:>6} "
        f"{report.attempts:>8}"
    )
    budget_tokens = report.daily_tokens_budget or "no limit"
    budget_cost = report.daily_cost_budget_micros or "no limit"
    rows.append(
        f"today: {report.tokens_today} tokens of {budget_tokens}, "
        f"{report.cost_today_micros} cost micro-units of {budget_cost}"
    )
    return "\n".join(rows)


def _credentials(reply: job_pb.ListUserCredentialsResponse) -> str:
    lines = [
        f"{c.credential_id}  {c.provider:<10} {c.hint:<12} {c.label}".rstrip()
        for c in reply.credentials
    ]
    return "\n".join(lines) or "no credentials"


def _page(reply: job_pb.ListJobsResponse) -> str:
    lines = [_job_line(job) for job in reply.jobs] or ["no jobs"]
    if reply.next_page_token:
        lines.append(f"next page: --page-token {reply.next_page_token}")
    return "\n".join(lines)


def _stats(stats: admin_pb.QueueStats) -> str:
    lines = [
        f"{d.queue_name:<16} {d.job_type:<24} {d.lifecycle_status:<10} {d.count}"
        for d in stats.depths
    ]
    lines += [f"oldest queued on {a.queue_name}: {a.age_seconds:.1f}s" for a in stats.oldest_queued]
    lines += [f"waiting for the cheap hours on {d.queue_name}: {d.count}" for d in stats.deferred]
    lines.append(
        f"running {stats.running_count}; outbox pending {stats.pending_outbox_events}, "
        f"dead {stats.dead_outbox_events}, lag {stats.outbox_lag_seconds:.1f}s"
    )
    for key in stats.model_keys:
        paused = (
            f", paused until {key.paused_until.ToDatetime():%H:%M:%S}"
            if key.HasField("paused_until")
            else ""
        )
        lines.append(
            f"model {_limit_line(key.limit)}: in flight {key.in_flight}, "
            f"effective concurrency {key.effective_concurrency or 'none'}{paused}, "
            f"429s {key.rate_limited_last_minute} in the last minute "
            f"({key.rate_limited_total} in all)"
        )
    return "\n".join(lines)


def _audit_lines(page: admin_pb.ListAuditEntriesResponse) -> str:
    lines = [
        f"{e.occurred_at.ToDatetime():%Y-%m-%d %H:%M:%S}  {e.actor:<20} {e.action:<20} "
        f"{e.outcome:<18} {e.target_json}"
        for e in page.entries
    ]
    if page.next_page_token:
        lines.append(f"more: --page-token {page.next_page_token}")
    return "\n".join(lines)


def _limit_line(limit: admin_pb.ModelLimit) -> str:
    def shown(value: int) -> str:
        return str(value) if value else "default"

    return (
        f"{limit.provider}/{limit.model} ({limit.credential_scope}): concurrency "
        f"{shown(limit.max_concurrency)}, rpm {shown(limit.requests_per_minute)}, "
        f"tpm {shown(limit.tokens_per_minute)}"
    )


MAX_BATCH = 500


def _item_of(line: str) -> job_pb.CreateJobsItem:
    fields = json.loads(line)
    if not isinstance(fields, dict):
        raise ValueError("expected a JSON object")
    user = str(fields.pop("user_id", fields.pop("userId", "")))
    job = json_format.ParseDict(fields, job_pb.CreateJobRequest())
    return job_pb.CreateJobsItem(user_id=user, job=job)


def _status_text(status: status_pb2.Status) -> str:
    code = next((c.name for c in grpc.StatusCode if c.value[0] == status.code), str(status.code))
    reason = ""
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            reason = f" {info.reason}"
    return f"{code}{reason}: {status.message}"


class _Progress:
    """A one-line progress bar on stderr when it is a terminal; nothing otherwise."""

    WIDTH = 30

    def __init__(self, total: int) -> None:
        self.total = max(total, 1)
        self.seen = 0
        self.shown = sys.stderr.isatty()

    def advance(self, count: int, failed: int) -> None:
        self.seen += count
        if self.shown:
            filled = self.WIDTH * self.seen // self.total
            bar = "#" * filled + "." * (self.WIDTH - filled)
            print(f"\r[{bar}] {self.seen}/{self.total}, {failed} failed", end="", file=sys.stderr)

    def done(self) -> None:
        if self.shown:
            print(file=sys.stderr)


async def _run(args: argparse.Namespace) -> int:
    cli = Cli(args, ClientSettings())
    try:
        handlers: dict[str, Callable[[], Awaitable[int]]] = {
            "create": cli.create,
            "create-many": cli.create_many,
            "get": cli.get,
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
    args = _parser().parse_args(argv)
    if args.command == "console":
        from aijob.console.server import main as console  # the web server only for this

        return console()
    try:
        return asyncio.run(_run(args))
    except MissingTokenError as error:
        print(f"aijob: {error}", file=sys.stderr)
        return EXIT_AUTH
    except AijobError as error:
        print(f"aijob: {error}", file=sys.stderr)
        return _EXIT_OF_STATUS.get(error.code, EXIT_OTHER)
    except KeyboardInterrupt:
        return EXIT_OTHER


if __name__ == "__main__":
    sys.exit(main())

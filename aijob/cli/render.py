"""What the ``aijob`` command prints: a reply as JSON, or as lines for a person."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

from aijob.admin_client import breaker_text
from aijob.trees import depth_first
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import types_pb2


def print_reply(message: Message, as_json: bool, human: Callable[[Any], str]) -> None:
    if as_json:
        print(json_format.MessageToJson(message, indent=2, preserving_proto_field_name=False))
    else:
        print(human(message))


def job_line(job: types_pb2.Job) -> str:
    line = (
        f"{job.job_id}  {job.job_type:<24} {job.lifecycle_status:<9} "
        f"attempt {job.attempt_count}/{job.max_attempts}  progress {job.progress}%"
    )
    if job.error_code:
        line += f"  {job.error_code}: {job.public_error_message}"
    return line


def job_details(job: types_pb2.Job) -> str:
    lines = [job_line(job)]
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


def tree_lines(tree: job_pb.GetJobTreeResponse) -> str:
    """The tree depth first, indented by level, each node's status, attempts and the code it
    ended with, then the whole tree's usage and cost."""
    lines = [
        f"{'  ' * depth}{node.job_id}  {node.job_type:<24} "
        f"{node.lifecycle_status:<9} attempts {node.attempt_count}"
        + (f"  {node.error_code}" if node.error_code else "")
        for depth, node in depth_first(tree)
    ]
    lines.append(
        f"{len(tree.nodes)} jobs; tokens {tree.prompt_tokens} prompt "
        f"({tree.cached_prompt_tokens} cached) + {tree.completion_tokens} completion; "
        f"cost {tree.cost_micros / 1_000_000:.6f}"
    )
    return "\n".join(lines)


_EFFORTS = {1: "off", 2: "low", 3: "high", 4: "max"}


def job_type_lines(reply: job_pb.ListJobTypesResponse) -> str:
    """A line per job type: its name, queue, default model (and the others a create may name)
    and reasoning effort (and the others a create may ask for)."""
    lines = []
    for t in reply.job_types:
        models = ", ".join([t.model_name, *t.allowed_models])
        efforts = ", ".join(_EFFORTS.get(e, "?") for e in t.allowed_reasoning_efforts)
        lines.append(
            f"{t.job_type:<26} {t.queue_name:<15} models {models}; "
            f"reasoning {_EFFORTS.get(t.reasoning_effort, 'off')} (may ask {efforts})"
        )
    return "\n".join(lines)


def budget_line(reply: admin_pb.PutUserBudgetResponse) -> str:
    tokens = reply.daily_tokens or "no limit"
    cost = reply.daily_cost_micros or "no limit"
    return f"{reply.user_id}: {tokens} tokens, {cost} cost micro-units per UTC day"


def usage_table(report: admin_pb.GetUserUsageResponse) -> str:
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


def credentials_lines(reply: job_pb.ListUserCredentialsResponse) -> str:
    lines = [
        f"{c.credential_id}  {c.provider:<10} {c.hint:<12} {c.label}".rstrip()
        for c in reply.credentials
    ]
    return "\n".join(lines) or "no credentials"


def page_lines(reply: job_pb.ListJobsResponse) -> str:
    lines = [job_line(job) for job in reply.jobs] or ["no jobs"]
    if reply.next_page_token:
        lines.append(f"next page: --page-token {reply.next_page_token}")
    return "\n".join(lines)


def stats_lines(stats: admin_pb.QueueStats) -> str:
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
            f"model {limit_line(key.limit)}: in flight {key.in_flight}, "
            f"effective concurrency {key.effective_concurrency or 'none'}{paused}, "
            f"429s {key.rate_limited_last_minute} in the last minute "
            f"({key.rate_limited_total} in all)"
        )
    return "\n".join(lines)


def audit_lines(page: admin_pb.ListAuditEntriesResponse) -> str:
    lines = [
        f"{e.occurred_at.ToDatetime():%Y-%m-%d %H:%M:%S}  {e.actor:<20} {e.action:<20} "
        f"{e.outcome:<18} {e.target_json}"
        for e in page.entries
    ]
    if page.next_page_token:
        lines.append(f"more: --page-token {page.next_page_token}")
    return "\n".join(lines)


def limit_line(limit: admin_pb.ModelLimit) -> str:
    def shown(value: int) -> str:
        return str(value) if value else "default"

    line = (
        f"{limit.provider}/{limit.model} ({limit.credential_scope}): concurrency "
        f"{shown(limit.max_concurrency)}, rpm {shown(limit.requests_per_minute)}, "
        f"tpm {shown(limit.tokens_per_minute)}"
    )
    if limit.breaker_state not in (
        admin_pb.BREAKER_STATE_UNSPECIFIED,
        admin_pb.BREAKER_STATE_CLOSED,
    ):
        line += f"; breaker {breaker_text(limit.breaker_state)}"
    return line


def tier_name(index: int) -> str:
    """The name the scheduler records for a route's tier (``modelTier``)."""
    if index == 0:
        return "primary"
    return "fallback" if index == 1 else f"fallback-{index}"


def route_line(route: admin_pb.ModelRoute) -> str:
    tiers = ", ".join(
        f"{tier_name(index)} {t.provider}/{t.model}" for index, t in enumerate(route.tiers)
    )
    return f"{route.job_type}: {tiers}"


def status_text(status: status_pb2.Status) -> str:
    code = next((c.name for c in grpc.StatusCode if c.value[0] == status.code), str(status.code))
    reason = ""
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            reason = f" {info.reason}"
    return f"{code}{reason}: {status.message}"


class Progress:
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

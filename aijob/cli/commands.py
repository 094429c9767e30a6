"""Each ``aijob`` command, run on the public client (:mod:`aijob.client`)."""

from __future__ import annotations

import argparse
import functools
import json
import sys
import uuid
from typing import Any

from google.protobuf import json_format

from aijob.admin_client import breaker_text
from aijob.cli.exit_codes import EXIT_OF_TERMINAL, EXIT_OTHER, EXIT_REFUSED, EXIT_USAGE
from aijob.cli.render import (
    Progress,
    audit_lines,
    budget_line,
    credentials_lines,
    job_details,
    job_line,
    job_type_lines,
    limit_line,
    page_lines,
    print_reply,
    route_line,
    stats_lines,
    status_text,
    tree_lines,
    usage_table,
)
from aijob.client import AdminClient, JobsClient
from aijob.connection import ClientSettings
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import types_pb2
from shared.model_catalogue import canonical_model

TIMEOUT_S = 30
#: The admin commands on model keys and routes.
MODEL_COMMANDS = frozenset({"model-limit", "model-limits", "model-route", "reset-breaker"})
#: aijob create --cost-policy
COST_POLICIES = {
    "immediate": types_pb2.COST_POLICY_IMMEDIATE,
    "off_peak": types_pb2.COST_POLICY_OFF_PEAK,
}
#: aijob create --join-policy
JOIN_POLICIES = {
    "all_success": job_pb.JOIN_POLICY_ALL_SUCCESS,
    "all_done": job_pb.JOIN_POLICY_ALL_DONE,
}
REASONING = {
    "off": types_pb2.REASONING_EFFORT_OFF,
    "low": types_pb2.REASONING_EFFORT_LOW,
    "high": types_pb2.REASONING_EFFORT_HIGH,
    "max": types_pb2.REASONING_EFFORT_MAX,
}
MAX_BATCH = 500


def item_of(line: str) -> job_pb.CreateJobsItem:
    fields = json.loads(line)
    if not isinstance(fields, dict):
        raise ValueError("expected a JSON object")
    user = str(fields.pop("user_id", fields.pop("userId", "")))
    job = json_format.ParseDict(fields, job_pb.CreateJobRequest())
    return job_pb.CreateJobsItem(user_id=user, job=job)


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
            cost_policy=COST_POLICIES.get(a.cost_policy, types_pb2.COST_POLICY_UNSPECIFIED),
            credential_id=a.credential_id,
            credential_mode="user_deepseek_key" if a.credential_id else "",
            parent_job_id=a.parent,
            max_parallel=a.max_parallel,
            join_policy=JOIN_POLICIES.get(a.join_policy, job_pb.JOIN_POLICY_UNSPECIFIED),
            reasoning_effort=REASONING.get(a.reasoning, types_pb2.REASONING_EFFORT_UNSPECIFIED),
        )
        json_format.ParseDict(a.snapshot, request.snapshot)
        json_format.ParseDict(a.params, request.params)
        if a.priority is not None:
            request.priority = a.priority
        reply = await self.jobs.submit(request)
        if a.json:
            # The job as `get --json` prints it, and whether this call created it.
            shown = json_format.MessageToDict(reply.job) | {"created": reply.created}
            print(json.dumps(shown, indent=2))
        else:
            print(("created " if reply.created else "existing ") + job_line(reply.job))
        return 0

    async def create_many(self) -> int:
        """Exit 0 when every line made (or found) its job; else 5, with each failure on stderr."""
        a = self.args
        if not 1 <= a.batch <= MAX_BATCH:
            print(f"aijob: --batch must be 1-{MAX_BATCH}", file=sys.stderr)
            return EXIT_USAGE
        lines = [line for line in a.file.read_text().splitlines() if line.strip()]
        progress = Progress(len(lines))
        failures: list[str] = []
        results: list[dict[str, Any]] = []
        for start in range(0, len(lines), a.batch):
            items: dict[int, job_pb.CreateJobsItem] = {}
            for number in range(start, min(start + a.batch, len(lines))):
                try:
                    items[number] = item_of(lines[number])
                except (ValueError, json_format.ParseError) as error:
                    failures.append(f"line {number + 1}: not a CreateJobRequest: {error}")
            results_of_batch = await self.jobs.create_many(
                list(items.values()), timeout_s=TIMEOUT_S * 4
            )
            for number, result in zip(items, results_of_batch, strict=True):
                if result.status.code:
                    failures.append(f"line {number + 1}: {status_text(result.status)}")
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
        job = await self.jobs.get(self.args.job_id)
        print_reply(job, self.args.json, job_details)
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
                print(job_line(job), flush=True)
        if last is None:
            return EXIT_OTHER
        if not self.args.json and last.HasField("result"):
            print(job_details(last))
        return EXIT_OF_TERMINAL.get(last.lifecycle_status, EXIT_OTHER)

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

    async def types(self) -> int:
        print_reply(await self.jobs.job_types(), self.args.json, job_type_lines)
        return 0

    async def tree(self) -> int:
        print_reply(await self.jobs.tree(self.args.job_id), self.args.json, tree_lines)
        return 0

    async def cancel(self) -> int:
        reply = await self.jobs.cancel(self.args.job_id)
        print_reply(reply, self.args.json, lambda r: f"{r.outcome}: {job_line(r.job)}")
        return 0

    async def list(self) -> int:
        a = self.args
        reply = await self.jobs.page(
            job_type=a.type,
            status=a.status,
            page_size=a.page_size,
            page_token=a.page_token,
            parent_job_id=a.parent,
        )
        print_reply(reply, a.json, page_lines)
        return 0

    async def _merged_limit(self) -> admin_pb.ModelLimit:
        """The key's limits as they are, with the ones given changed: setting one limit keeps
        the others (a name DeepSeek serves with another model is that model's key)."""
        a = self.args
        key = (a.provider, canonical_model(a.model), a.scope)
        limit = admin_pb.ModelLimit()
        for current in await self.admin.model_limits():
            if (current.provider, current.model, current.credential_scope) == key:
                limit.CopyFrom(current)
        limit.provider, limit.model, limit.credential_scope = a.provider, a.model, a.scope
        given = {
            "max_concurrency": a.concurrency,
            "requests_per_minute": a.rpm,
            "tokens_per_minute": a.tpm,
            "max_concurrency_per_user": a.per_user,
            "daily_cost_micros": a.daily_cost_micros,
        }
        for name, value in given.items():
            if value is not None:
                setattr(limit, name, value)
        return limit

    async def _model_route(self) -> int:
        a = self.args
        if a.tiers and a.clear:
            print("aijob: give tiers or --clear, not both", file=sys.stderr)
            return EXIT_USAGE
        if a.tiers or a.clear:
            route = await self.admin.put_model_route(a.job_type, [] if a.clear else a.tiers)
        else:
            route = await self.admin.model_route(a.job_type)
        print_reply(route, a.json, route_line)
        return 0

    async def credential(self) -> int:
        a = self.args
        if a.credential_command == "put":
            api_key = sys.stdin.readline().strip()
            stored = await self.jobs.put_credential(a.provider, api_key, a.label)
            print_reply(stored, a.json, lambda r: f"stored {r.credential_id}  {r.hint}")
        elif a.credential_command == "list":
            listed = await self.jobs.credentials()
            print_reply(listed, a.json, credentials_lines)
        else:
            deleted = await self.jobs.delete_credential(a.credential_id)
            print_reply(deleted, a.json, lambda r: f"deleted {r.credential_id}")
        return 0

    async def _model_command(self) -> int:
        """The admin commands on model keys and routes."""
        a = self.args
        if a.admin_command == "model-route":
            return await self._model_route()
        if a.admin_command == "model-limit":
            limit = await self.admin.put_model_limit(await self._merged_limit())
            stored = admin_pb.PutModelLimitResponse(limit=limit)
            print_reply(stored, a.json, lambda r: f"set {limit_line(r.limit)}")
        elif a.admin_command == "model-limits":
            listed = admin_pb.ListModelLimitsResponse(limits=await self.admin.model_limits())
            print_reply(
                listed, a.json, lambda r: "\n".join(map(limit_line, r.limits)) or "none set"
            )
        else:
            reset = await self.admin.reset_breaker(a.provider, a.model, a.credential_id)
            print_reply(
                reset,
                a.json,
                lambda r: (
                    f"breaker of {a.provider}/{a.model}: {breaker_text(r.breaker_state)} "
                    f"({'it was open' if r.was_open else 'it was not open'})"
                ),
            )
        return 0

    async def admin_command(self) -> int:
        a = self.args
        if a.admin_command in MODEL_COMMANDS:
            return await self._model_command()
        if a.admin_command == "list":
            page = await self.admin.page(
                a.page_size,
                a.page_token,
                user_id=a.user_id,
                job_type=a.type,
                lifecycle_status=a.status,
                queue_name=a.queue,
            )
            print_reply(page, a.json, page_lines)
        elif a.admin_command == "retry":
            job = await self.admin.retry(a.job_id)
            print_reply(job, a.json, lambda j: f"retried as {job_line(j)}")
        elif a.admin_command == "stats":
            stats = await self.admin.stats()
            print_reply(stats, a.json, stats_lines)
        elif a.admin_command == "budget":
            stored_budget = await self.admin.put_budget(a.user_id, a.tokens, a.cost_micros)
            print_reply(stored_budget, a.json, budget_line)
        elif a.admin_command == "usage":
            report = await self.admin.usage(a.user_id, a.from_date, a.to_date)
            print_reply(report, a.json, usage_table)
        elif a.admin_command == "audit":
            entries = await self.admin.audit_page(a.page_size, a.page_token)
            print_reply(entries, a.json, audit_lines)
        elif a.admin_command == "adopt-legacy":
            adoption = await self.admin.adopt_legacy(a.job_type, dry_run=a.dry_run)
            verb = "would adopt" if a.dry_run else "adopted"
            print_reply(
                adoption,
                a.json,
                lambda r: f"{verb}: {r.adopted}, left to the legacy worker: {r.left_to_legacy}",
            )
        elif a.admin_command == "reencrypt-credentials":
            moved = await self.admin.reencrypt_credentials()
            print_reply(
                moved,
                a.json,
                lambda r: f"re-encrypted {r.reencrypted}, all under key {r.key_version}",
            )
        else:
            redriven = await self.admin.redrive(a.event_ids)
            reply = admin_pb.RedriveDeadEventsResponse(redriven=redriven)
            print_reply(reply, a.json, lambda r: f"redriven: {r.redriven}")
        return 0

"""The `aijob` CLI against a real stack (`make run`'s launcher), and both metrics endpoints."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.stack import Stack, running_stack


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("stack")) as started:
        yield started


def aijob(
    stack: Stack, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {**stack.env, "AIJOB_SCHEDULER_ADDR": stack.env["AIJOB_LISTEN"]}
    return subprocess.run(
        [sys.executable, "-m", "aijob.cli", *args],
        cwd=stack.cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_banner_says_where_to_connect(stack: Stack) -> None:
    banner = stack.banner
    assert "scheduler" in banner and "service token" in banner and "scripted model" in banner


def test_cli_create_watch_get_list_cancel(stack: Stack) -> None:
    created = aijob(
        stack, "--json", "create", "synthetic_echo", "--snapshot", '{"text": "from the cli"}'
    )
    assert created.returncode == 0, created.stderr
    job_id = json.loads(created.stdout)["jobId"]
    watched = aijob(stack, "watch", job_id)
    assert watched.returncode == 0, watched.stderr
    assert "succeeded" in watched.stdout.splitlines()[-1] or "succeeded" in watched.stdout
    got = aijob(stack, "--json", "get", job_id)
    assert got.returncode == 0 and json.loads(got.stdout)["lifecycleStatus"] == "succeeded"
    assert json.loads(json.loads(got.stdout)["result"]["outputJson"]) == {
        "echo": {"text": "from the cli"}
    }
    listed = aijob(stack, "list")
    assert listed.returncode == 0 and job_id in listed.stdout
    refused = aijob(stack, "cancel", job_id)
    assert refused.returncode == 5 and "JOB_NOT_CANCELLABLE" in refused.stderr
    missing = aijob(stack, "get", "01a2b3c4-0000-7000-8000-000000000000")
    assert missing.returncode == 4 and "JOB_NOT_FOUND" in missing.stderr
    bad_token = aijob(stack, "get", job_id, env={"AIJOB_SERVICE_TOKEN": "wrong"})
    assert bad_token.returncode == 6
    usage = aijob(stack, "create")
    assert usage.returncode == 2


def test_cli_builds_a_tree_and_prints_it_with_its_cost(stack: Stack, tmp_path: Path) -> None:
    """A parent and its children in one CreateJobs call ("#0": the call's first item), so the
    parent waits for them from its first moment."""
    lines = [{"jobType": "synthetic_echo", "maxParallel": 1, "snapshot": {"n": "parent"}}]
    lines += [
        {"jobType": "synthetic_echo", "parentJobId": "#0", "snapshot": {"n": n}} for n in range(2)
    ]
    file = tmp_path / "tree.jsonl"
    file.write_text("\n".join(json.dumps(line) for line in lines))
    created = aijob(stack, "--json", "create-many", str(file))
    assert created.returncode == 0, created.stderr
    parent_id = json.loads(created.stdout)[0]["job"]["jobId"]
    children = aijob(stack, "--json", "list", "--parent", parent_id)
    assert len(json.loads(children.stdout)["jobs"]) == 2
    assert aijob(stack, "watch", parent_id).returncode == 0
    tree = aijob(stack, "tree", parent_id)
    assert tree.returncode == 0, tree.stderr
    shown = tree.stdout.splitlines()
    assert shown[0].startswith(parent_id) and "succeeded" in shown[0]
    assert all(line.startswith("  ") and "succeeded" in line for line in shown[1:3])
    assert shown[3].startswith("3 jobs;") and "cost" in shown[3]


def test_cli_watch_output_prints_the_text_as_it_is_written(stack: Stack) -> None:
    snapshot = {
        "learner": {"id": "l-1"},
        "material": {"id": "m-1", "title": "scripted-fault=drip:1500"},
        "knowledgePoints": [{"id": "k-1", "name": "Mitochondria", "mastery": 0.2}],
    }
    created = aijob(
        stack, "--json", "create", "quiz_generation", "--snapshot", json.dumps(snapshot)
    )
    assert created.returncode == 0, created.stderr
    job_id = json.loads(created.stdout)["jobId"]
    watched = aijob(stack, "watch", "--output", job_id)
    assert watched.returncode == 0, watched.stderr
    text, *states = watched.stdout.splitlines()
    assert json.loads(text)["questions"]  # the model's answer, printed before the job's states
    assert "succeeded" in states[-1] or "succeeded" in watched.stdout


def test_cli_admin_commands(stack: Stack) -> None:
    failing = aijob(
        stack, "--json", "create", "synthetic_echo", "--snapshot", '{"note": "scripted-fault=401"}'
    )
    job_id = json.loads(failing.stdout)["jobId"]
    watched = aijob(stack, "watch", job_id)
    assert watched.returncode == 1 and "INVALID_CREDENTIAL" in watched.stdout  # failed: exit 1
    retried = aijob(stack, "--json", "admin", "retry", job_id)
    assert retried.returncode == 0 and json.loads(retried.stdout)["retriedFromJobId"] == job_id
    stats = aijob(stack, "admin", "stats")
    assert stats.returncode == 0 and "synthetic_echo" in stats.stdout
    listed = aijob(stack, "--json", "admin", "list", "--status", "failed")
    assert job_id in listed.stdout
    assert aijob(stack, "admin", "redrive").stdout.strip() == "redriven: 0"


def test_cli_model_limits(stack: Stack) -> None:
    limit = aijob(
        stack,
        "admin",
        "model-limit",
        "deepseek",
        "deepseek-chat",
        "--concurrency",
        "8",
        "--rpm",
        "600",
    )
    assert limit.returncode == 0
    # deepseek-chat is a name of V4 Flash: the limit is set on that model's key.
    assert limit.stdout.strip() == (
        "set deepseek/deepseek-v4-flash (platform): concurrency 8, rpm 600, tpm default"
    )
    listed = json.loads(aijob(stack, "--json", "admin", "model-limits").stdout)
    assert listed["limits"] == [
        {
            "provider": "deepseek",
            "model": "deepseek-v4-flash",
            "credentialScope": "platform",
            "maxConcurrency": 8,
            "requestsPerMinute": 600,
            "breakerState": "BREAKER_STATE_CLOSED",
        }
    ]
    stats = aijob(stack, "admin", "stats")
    assert "model deepseek/deepseek-v4-flash (platform): concurrency 8, rpm 600" in stats.stdout
    # Setting one limit keeps the others; the per-user and daily-cost caps can be set too.
    again = aijob(
        stack,
        "admin",
        "model-limit",
        "deepseek",
        "deepseek-v4-flash",
        "--concurrency",
        "6",
        "--per-user",
        "2",
        "--daily-cost-micros",
        "5000000",
    )
    assert again.returncode == 0, again.stderr
    (kept,) = json.loads(aijob(stack, "--json", "admin", "model-limits").stdout)["limits"]
    assert (
        kept["maxConcurrency"],
        kept["requestsPerMinute"],
        kept["maxConcurrencyPerUser"],
        kept["dailyCostMicros"],
    ) == (6, 600, 2, "5000000")
    refused = aijob(stack, "admin", "model-limit", "deep seek", "m")
    assert refused.returncode == 5 and "limit.provider" in refused.stderr
    # The status once: the public code adds to it only when it says more.
    assert refused.stderr.startswith("aijob: INVALID_ARGUMENT: "), refused.stderr


def test_cli_model_route_and_breaker_reset(stack: Stack) -> None:
    own = aijob(stack, "admin", "model-route", "synthetic_echo")
    assert own.returncode == 0, own.stderr
    assert own.stdout.startswith("synthetic_echo: primary deepseek/"), own.stdout
    assert "fallback" not in own.stdout
    routed = aijob(
        stack,
        "admin",
        "model-route",
        "synthetic_echo",
        "deepseek/deepseek-v4-pro",
        "backup/model-b",
    )
    assert routed.returncode == 0, routed.stderr
    assert routed.stdout.strip() == (
        "synthetic_echo: primary deepseek/deepseek-v4-pro, fallback backup/model-b"
    )
    read = json.loads(aijob(stack, "--json", "admin", "model-route", "synthetic_echo").stdout)
    assert read["tiers"] == [
        {"provider": "deepseek", "model": "deepseek-v4-pro"},
        {"provider": "backup", "model": "model-b"},
    ]
    cleared = aijob(stack, "admin", "model-route", "synthetic_echo", "--clear")
    assert cleared.returncode == 0 and cleared.stdout == own.stdout
    malformed = aijob(stack, "admin", "model-route", "synthetic_echo", "deepseek")
    assert malformed.returncode == 2 and "a tier is provider/model" in malformed.stderr
    unknown = aijob(stack, "admin", "model-route", "no_such_type")
    assert unknown.returncode != 0 and "Traceback" not in unknown.stderr
    reset = aijob(stack, "admin", "reset-breaker", "deepseek", "deepseek-v4-flash")
    assert reset.returncode == 0, reset.stderr
    assert reset.stdout.strip() == (
        "breaker of deepseek/deepseek-v4-flash: closed (it was not open)"
    )


def test_cli_credentials_budget_and_usage(stack: Stack) -> None:
    stored = subprocess.run(
        [sys.executable, "-m", "aijob.cli", "--user", "cli-payer", "credential", "put", "deepseek"],
        cwd=stack.cwd,
        env={**stack.env, "AIJOB_SCHEDULER_ADDR": stack.env["AIJOB_LISTEN"]},
        input="sk-cli-0123456789abcdef0123\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert stored.returncode == 0, stored.stderr
    assert stored.stdout.strip().endswith("sk-...0123")
    listed = aijob(stack, "--user", "cli-payer", "credential", "list")
    assert "sk-...0123" in listed.stdout and "0123456789abcdef" not in listed.stdout
    budget = aijob(stack, "admin", "budget", "cli-payer", "--tokens", "5000")
    assert budget.stdout.strip() == (
        "cli-payer: 5000 tokens, no limit cost micro-units per UTC day"
    )
    job = json.loads(
        aijob(stack, "--json", "--user", "cli-payer", "create", "synthetic_echo").stdout
    )
    assert aijob(stack, "--user", "cli-payer", "watch", job["jobId"]).returncode == 0
    # The global flags after the command too.
    shown = json.loads(aijob(stack, "get", job["jobId"], "--json", "--user", "cli-payer").stdout)
    # create --json and get --json print the same shape: the job (create adds whether it made it).
    assert shown["jobId"] == job["jobId"] and shown["jobType"] == job["jobType"]
    assert job["created"] is True and "created" not in shown
    usage = aijob(stack, "admin", "usage", "cli-payer")
    assert usage.returncode == 0, usage.stderr
    lines = usage.stdout.splitlines()
    assert lines[2].startswith("deepseek/deepseek-v4-flash (platform)")
    assert lines[-2].startswith("total") and lines[-2].split()[-2:] == ["1", "1"]
    assert "of 5000" in lines[-1]


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


def _value(text: str, pattern: str) -> float:
    values = [
        float(m.group(1)) for m in re.finditer(pattern + r" ([0-9.e+]+)$", text, re.MULTILINE)
    ]
    return sum(values)


def test_metrics_endpoints_count_the_work(stack: Stack) -> None:
    created = aijob(
        stack, "--json", "create", "quiz_generation", "--snapshot", '{"learner": {"id": "l"}}'
    )
    job_id = json.loads(created.stdout)["jobId"]
    assert aijob(stack, "watch", job_id).returncode == 0
    scheduler = _scrape(int(stack.env["AIJOB_METRICS_LISTEN"].rsplit(":", 1)[1]))
    assert _value(scheduler, r'aijob_rpc_total\{code="OK",method="CreateJob"\}') >= 1
    # The runtime reports its result on its Poll stream, counted by the kind and code of its ack.
    assert _value(scheduler, r'aijob_reports_total\{code="OK",kind="result"\}') >= 1
    assert _value(scheduler, r"aijob_report_batch_size_count") >= 1
    assert _value(scheduler, r"aijob_leases_total") >= 1
    assert _value(scheduler, r"aijob_enqueue_to_lease_seconds_count") >= 1
    assert _value(scheduler, r'aijob_job_outcomes_total\{status="succeeded"\}') >= 1
    runtimes = [_scrape(port) for port in stack.runtime_ports]
    assert sum(_value(t, r'aijob_runtime_jobs_total\{outcome="succeeded"\}') for t in runtimes) >= 1
    assert sum(_value(t, r'aijob_runtime_tokens_total\{kind="completion"\}') for t in runtimes) > 0
    assert sum(_value(t, r"aijob_runtime_connected") for t in runtimes) == 2


def test_cli_create_many_reads_a_jsonl_file_and_names_each_bad_line(stack: Stack) -> None:
    lines = [
        json.dumps({"job_type": "synthetic_echo", "snapshot": {"text": f"n{i}"}}) for i in range(7)
    ]
    lines[2] = json.dumps({"job_type": "no_such_type", "snapshot": {}})
    lines[4] = "{not json"
    lines.append(json.dumps({"jobType": "synthetic_echo", "snapshot": {}, "user_id": "other"}))
    path = stack.cwd / "jobs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    done = aijob(stack, "--json", "create-many", str(path), "--batch", "3")
    assert done.returncode == 5, done.stderr
    results = json.loads(done.stdout)
    assert len(results) == 7  # the line that is not JSON was never sent
    created = [r for r in results if r.get("created")]
    assert len(created) == 6 and created[-1]["job"]["userId"] == "other"
    assert (
        "line 3: INVALID_ARGUMENT" in done.stderr
        and "line 5: not a CreateJobRequest" in done.stderr
    )
    assert "6 created or found, 2 failed" in done.stderr


def test_cli_lists_the_job_types_and_names_the_valid_ones_when_refusing(stack: Stack) -> None:
    listed = aijob(stack, "types")
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.startswith("weak_point_analysis"))
    assert "deepseek-v4-flash" in line and "reasoning off (may ask off, low, high, max)" in line
    unknown = aijob(stack, "create", "no_such_type")
    assert unknown.returncode == 5 and "quiz_generation" in unknown.stderr
    model = aijob(stack, "create", "synthetic_echo", "--model", "no-such-model")
    assert model.returncode == 5 and "deepseek-v4-pro" in model.stderr


def test_the_console_says_in_one_line_when_it_cannot_listen() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        busy = subprocess.run(
            [sys.executable, "-m", "aijob.cli", "console", "--listen", address],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert busy.returncode == 2
    assert busy.stderr.startswith(f"aijob console: cannot listen on {address}: ")
    assert "Traceback" not in busy.stderr and len(busy.stderr.splitlines()) == 1
    wrong = subprocess.run(
        [sys.executable, "-m", "aijob.cli", "console", "--listen", "nowhere"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (wrong.returncode, wrong.stderr.strip()) == (
        2,
        "aijob console: --listen wants HOST:PORT, not 'nowhere'",
    )

"""The local stack behind ``make run`` and ``make demo``.

    python -m devtools.devstack run     # scheduler + scripted model + two runtimes, until Ctrl-C
    python -m devtools.devstack demo    # the same, then one job of each type, live, and stop

Defaults are embedded (SQLite file, loopback, development tokens, the scripted model unless
DEEPSEEK_API_KEY is set); any AIJOB_* setting in the environment overrides them, so a second copy
can run beside the first (AIJOB_LISTEN, AIJOB_DATABASE_URL, AIJOB_METRICS_LISTEN, ...).
Children log to .aijob/logs/; stopping sends them SIGTERM in order (runtimes drain first).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format
from grpc_health.v1 import health_pb2, health_pb2_grpc

from aijob.connection import ClientSettings
from shared.config import split_commas
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import job_service_pb2_grpc as job_grpc
from shared.gen.aijob.v1 import types_pb2

STATE_DIR = Path(".aijob")
LOG_DIR = STATE_DIR / "logs"
#: The development credential key (``make run`` without AIJOB_CREDENTIAL_KEY).
DEV_CREDENTIAL_KEY_FILE = STATE_DIR / "dev-credential-key"
#: The development secret model calls' user_id pseudonyms are made with.
DEV_PROVIDER_USER_ID_KEY_FILE = STATE_DIR / "dev-provider-user-id-key"
RUNTIMES = 2

DEMO_SNAPSHOT: dict[str, Any] = {
    "learner": {"id": "learner-42", "level": "beginner", "goals": ["pass the biology exam"]},
    "material": {
        "id": "cells-101",
        "title": "Cell biology",
        "content": "Cells are the unit of life.",
    },
    "knowledgePoints": [
        {"id": "kp-mito", "name": "Mitochondria", "mastery": 0.2},
        {"id": "kp-membrane", "name": "Cell membrane", "mastery": 0.7},
    ],
    "answers": [
        {"questionId": "q1", "knowledgePointId": "kp-mito", "correct": False},
        {"questionId": "q2", "knowledgePointId": "kp-membrane", "correct": True},
    ],
}
DEMO_JOBS: list[tuple[str, dict[str, Any]]] = [
    ("learning_state_analysis", {}),
    ("weak_point_analysis", {}),
    ("next_action_planning", {}),
    ("quiz_generation", {"count": 3}),
    ("flashcard_generation", {"count": 3}),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_serving(address: str, timeout_s: float = 60) -> None:
    with grpc.insecure_channel(address) as channel:
        health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=timeout_s, wait_for_ready=True
        )


def _wait_http(url: str, timeout_s: float = 60) -> None:
    """Return once ``url`` answers 200 (the console is up)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)  # polling a process that is starting: there is nothing to await


def already_serving(address: str) -> bool:
    """Whether something accepts connections at ``address`` (another ``make run``, say)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=1):
            return True
    except OSError:
        return False


@dataclass
class Stack:
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    procs: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)

    @property
    def listen(self) -> str:
        return self.env.setdefault("AIJOB_LISTEN", "127.0.0.1:50051")

    def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = (LOG_DIR / f"{name}.log").open("ab")
        # A session of its own: Ctrl-C reaches only this launcher, which stops children in order.
        proc = subprocess.Popen(
            [sys.executable, *args], env=env, stdout=log, stderr=log, start_new_session=True
        )
        self.procs.append((name, proc))
        return proc

    def start(self) -> dict[str, str]:
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.env.setdefault("AIJOB_DATABASE_URL", "sqlite+aiosqlite:///./aijob.db")
        self.env.setdefault("AIJOB_METRICS_LISTEN", "127.0.0.1:9464")
        if not self.env.get("AIJOB_CREDENTIAL_KEY") and not self.env.get("AIJOB_CREDENTIAL_KEYS"):
            # Users' keys stored through the API need an encryption key: a development one,
            # kept beside the development tokens (a real deployment sets its own).
            self.env["AIJOB_CREDENTIAL_KEY"] = _dev_secret(DEV_CREDENTIAL_KEY_FILE)
        if not self.env.get("AIJOB_PROVIDER_USER_ID_KEY"):
            # DeepSeek's user_id is a pseudonym of the job's user under this secret.
            self.env["AIJOB_PROVIDER_USER_ID_KEY"] = _dev_secret(DEV_PROVIDER_USER_ID_KEY_FILE)
        subprocess.run(
            [sys.executable, "-m", "scheduler_service", "migrate"],
            env=self.env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=(LOG_DIR / "migrate.log").open("ab"),
        )
        self._spawn("scheduler", ["-m", "scheduler_service"], self.env)
        _wait_serving(self.listen)
        facts = {"scheduler": self.listen, "logs": str(LOG_DIR.resolve())}
        runtime_env = {**self.env, "AIJOB_SCHEDULER_ADDR": self.listen}
        if not self.env.get("DEEPSEEK_API_KEY"):
            port = int(self.env.get("AIJOB_SCRIPTED_MODEL_PORT", "0")) or _free_port()
            self._spawn(
                "scripted-model",
                ["-m", "devtools.scripted_model", "--port", str(port)],
                self.env,
            )
            runtime_env["AIJOB_MODEL_BASE_URL"] = f"http://127.0.0.1:{port}/v1"
            facts["model"] = f"scripted model at http://127.0.0.1:{port}/v1"
        else:
            facts["model"] = (
                f"DeepSeek at {runtime_env.get('AIJOB_MODEL_BASE_URL', 'https://api.deepseek.com')}"
            )
        tokens = _tokens(self.env)
        if "AIJOB_RUNTIME_TOKEN" not in runtime_env:
            runtime_env["AIJOB_RUNTIME_TOKEN"] = tokens["runtime"]
        for index in range(1, RUNTIMES + 1):
            env = {**runtime_env, "AIJOB_RUNTIME_INSTANCE_ID": f"dev-runtime-{index}"}
            base_port = int(self.env.get("AIJOB_RUNTIME_METRICS_BASE_PORT", "9464"))
            env["AIJOB_METRICS_LISTEN"] = f"127.0.0.1:{base_port + index}"
            self._spawn(f"runtime-{index}", ["-m", "runtime_service"], env)
        console = self.env.setdefault("AIJOB_CONSOLE_LISTEN", "127.0.0.1:8088")
        self._spawn("console", ["-m", "aijob.console"], {**runtime_env})
        _wait_http(f"http://{console}/login")
        facts["console"] = f"http://{console}/ (sign in with the admin token)"
        facts.update({f"{role} token": token for role, token in tokens.items()})
        return facts

    def stop(self) -> None:
        # Runtimes first (they drain and report), then the model, then the scheduler.
        for _name, proc in sorted(
            self.procs, key=lambda p: (not p[0].startswith("runtime"), p[0] == "scheduler")
        ):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=40)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def _dev_secret(path: Path) -> str:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(base64.b64encode(os.urandom(32)).decode())
        path.chmod(0o600)
    return path.read_text().strip()


def _tokens(env: dict[str, str]) -> dict[str, str]:
    configured = {
        role: next(iter(split_commas(env.get(f"AIJOB_{role.upper()}_TOKENS", ""))), "")
        for role in ("runtime", "service", "admin")
    }
    if all(configured.values()):
        return configured
    path = Path(env.get("AIJOB_DEV_TOKENS_FILE", ".aijob/dev-tokens.json"))
    return {str(k): str(v) for k, v in json.loads(path.read_text()).items()}


def _banner(facts: dict[str, str]) -> str:
    lines = ["", "AI Job Engine is up", ""]
    lines += [f"  {key:<14} {value}" for key, value in facts.items()]
    lines += [
        "",
        '  try:  .venv/bin/aijob create synthetic_echo --snapshot \'{"text": "hi"}\'',
        "        .venv/bin/grpcurl -plaintext " + facts["scheduler"] + " list",
        "",
        "  Ctrl-C stops everything.",
        "",
    ]
    return "\n".join(lines)


async def _demo(address: str) -> int:
    settings = ClientSettings(scheduler_addr=address)
    metadata = (
        ("authorization", f"Bearer {settings.token('service')}"),
        ("x-user-id", "demo-user"),
    )
    async with grpc.aio.insecure_channel(address) as channel:
        stub = job_grpc.JobServiceStub(channel)
        created = []
        for job_type, params in DEMO_JOBS:
            # The demo waits for its answers: no job waits for the provider's cheap hours.
            request = job_pb.CreateJobRequest(
                job_type=job_type,
                target_type="material",
                target_id="cells-101",
                cost_policy=types_pb2.COST_POLICY_IMMEDIATE,
            )
            json_format.ParseDict(DEMO_SNAPSHOT, request.snapshot)
            json_format.ParseDict(params, request.params)
            created.append((await stub.CreateJob(request, metadata=metadata, timeout=30)).job)
            print(f"created  {created[-1].job_id}  {job_type}", flush=True)
        finals = await asyncio.gather(*(_watch(stub, metadata, job) for job in created))
    print()
    for job in finals:
        print(_readable(job), flush=True)
    failed = [j for j in finals if j.lifecycle_status != "succeeded"]
    print(f"\n{len(finals) - len(failed)} of {len(finals)} jobs succeeded.")
    return 1 if failed else 0


async def _watch(stub: Any, metadata: Any, job: types_pb2.Job) -> types_pb2.Job:
    last = job
    async for update in stub.WatchJob(
        job_pb.WatchJobRequest(job_id=job.job_id), metadata=metadata, timeout=300
    ):
        last = update
        print(
            f"  {update.job_type:<24} {update.lifecycle_status:<9} progress {update.progress:>3}%",
            flush=True,
        )
    return last


def _readable(job: types_pb2.Job) -> str:
    head = (
        f"== {job.job_type}: {job.lifecycle_status} "
        f"(attempt {job.attempt_count}, {job.result.artifact_count} artifacts)"
    )
    if not job.result.output_json:
        return head + (
            f"\n   {job.error_code}: {job.public_error_message}" if job.error_code else ""
        )
    output = json.loads(job.result.output_json)
    lines = [head]
    if "summary" in output:
        lines.append(f"   {output['summary']} Mastery: {output['masteryLevel']}.")
    for point in output.get("weakPoints", []):
        rating = f"{point['severity']}, {point['confidence']}%"
        lines.append(f"   - {point['title']} ({rating}): {point['reason']}")
    for action in output.get("actions", []):
        lines.append(f"   {action['priority'] + 1}. {action['title']} — {action['reason']}")
    for question in output.get("questions", []):
        choices = "  ".join(f"{c['key']}) {c['text']}" for c in question.get("choices", []))
        lines.append(f"   Q: {question['stem']}  {choices}  [answer: {question['answer']}]")
    for card in output.get("cards", []):
        lines.append(f"   [{card['front']}] -> {card['back']}")
    return "\n".join(lines)


def after_exits(running: list[str], exited: dict[str, int]) -> int | None:
    """What the stack does when ``exited`` (name -> exit code) of the ``running`` processes end:
    None to keep serving, else the exit code to stop with. The scheduler ending, or a runtime
    failing, stops everything; a runtime that finished cleanly leaves the others serving, as long
    as one runtime is left."""
    if "scheduler" in exited or any(code != 0 for code in exited.values()):
        return 1
    runtimes_left = [n for n in running if n.startswith("runtime") and n not in exited]
    return None if runtimes_left else 0


def main(argv: list[str] | None = None) -> int:
    mode = (argv or sys.argv[1:] or ["run"])[0]
    stack = Stack()
    stopping = False

    def request_stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    if already_serving(stack.listen):
        # Starting a second stack would fail to bind and then talk to the first one.
        if mode == "demo":
            print(
                f"a stack already serves {stack.listen}: the demo runs its jobs there",
                flush=True,
            )
            return asyncio.run(_demo(stack.listen))
        print(
            f"a stack already serves {stack.listen} (make run in another terminal?): stop it, "
            "or start this one elsewhere with AIJOB_LISTEN (and AIJOB_METRICS_LISTEN, "
            "AIJOB_DATABASE_URL)",
            file=sys.stderr,
        )
        return 1
    try:
        facts = stack.start()
        print(_banner(facts), flush=True)
        if mode == "demo":
            return asyncio.run(_demo(stack.listen))
        watched = dict(stack.procs)
        while not stopping:
            time.sleep(0.2)
            exited = {
                name: proc.returncode for name, proc in watched.items() if proc.poll() is not None
            }
            if not exited:
                continue
            verdict = after_exits(list(watched), exited)
            for name, code in exited.items():
                print(f"{name} exited with {code}; see {LOG_DIR / name}.log", file=sys.stderr)
                del watched[name]
            if verdict is not None:
                return verdict
        return 0
    finally:
        print("stopping...", flush=True)
        stack.stop()


if __name__ == "__main__":
    sys.exit(main())

"""A non-Python client, tested: examples/node — @grpc/grpc-js and @grpc/proto-loader
with the documented options only — creates, watches, reads, cancels and lists jobs and decodes an
error's ErrorInfo against a live scheduler and a real runtime process.

Node and npm are needed: the test installs the example's locked packages into
examples/node/node_modules. Where Node is missing it skips and says so, except in CI
(AIJOB_REQUIRE_NODE=1, set by .ci/run), where a missing Node is a failure."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from devtools.harness import tokens
from devtools.scripted_model import ScriptedModelServer
from tests.support.runtime_procs import Launcher
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "node"


def _node() -> tuple[str, str]:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        if os.environ.get("AIJOB_REQUIRE_NODE") == "1":
            pytest.fail("node and npm are required here (AIJOB_REQUIRE_NODE=1)")
        pytest.skip("node and npm are not installed: the Node client example cannot run")
    return node, npm


def _installed(npm: str) -> None:
    if (EXAMPLE / "node_modules" / "@grpc" / "grpc-js").exists():
        return
    subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--silent"],
        cwd=EXAMPLE,
        check=True,
        timeout=600,
    )


async def test_the_node_example_runs_against_a_live_scheduler(
    scheduler: RunningScheduler, launch: Launcher, model_server: ScriptedModelServer
) -> None:
    node, npm = _node()
    await asyncio.to_thread(_installed, npm)
    launch(scheduler, "rt-for-node")
    done = await asyncio.to_thread(
        subprocess.run,
        [node, "client.js"],
        cwd=EXAMPLE,
        env={
            **os.environ,
            "AIJOB_SCHEDULER_ADDR": scheduler.address,
            "AIJOB_SERVICE_TOKEN": tokens.SERVICE_TOKEN,
            "AIJOB_USER_ID": "node-user",
            # Against the scripted model this answer never comes: something to cancel.
            "AIJOB_EXAMPLE_LONG_TEXT": "scripted-fault=hang",
        },
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["watched"][-1] == summary["final"] == "succeeded"
    assert summary["output"] == {"echo": {"text": "hello from node"}}
    assert summary["cancel_outcome"] in {"cancelled", "cancel_requested"}
    assert summary["cancel_final"] == "cancelled"
    assert summary["error"]["code"] == "NOT_FOUND"
    assert summary["error"]["info"]["reason"] == "JOB_NOT_FOUND"
    assert summary["error"]["info"]["domain"] == "aijob.v1"
    assert summary["job_id"] in summary["listed"]
    assert summary["created_at"].endswith("Z")

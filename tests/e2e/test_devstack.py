"""`make demo` as a user runs it: the whole local stack, one job of each type, then a clean stop."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from devtools.harness.procs import free_port

ROOT = Path(__file__).resolve().parent.parent.parent


def test_demo_completes_all_five_job_types(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "AIJOB_LISTEN": f"127.0.0.1:{free_port()}",
        "AIJOB_METRICS_LISTEN": f"127.0.0.1:{free_port()}",
        "AIJOB_RUNTIME_METRICS_BASE_PORT": str(free_port()),
    }
    env.pop("DEEPSEEK_API_KEY", None)
    done = subprocess.run(
        [sys.executable, "-m", "devtools.devstack", "demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 of 5 jobs succeeded." in done.stdout
    for job_type in (
        "learning_state_analysis",
        "weak_point_analysis",
        "next_action_planning",
        "quiz_generation",
        "flashcard_generation",
    ):
        assert f"== {job_type}: succeeded" in done.stdout
    assert "Q: " in done.stdout and "] -> " in done.stdout  # questions and cards shown readably
    assert (tmp_path / ".aijob" / "logs" / "scheduler.log").exists()
    assert "Traceback" not in done.stderr

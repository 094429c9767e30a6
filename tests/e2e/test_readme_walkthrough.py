"""The README's grpcurl walkthrough, run as printed against `make run`'s stack (only the ports are
changed, so the test can run beside a developer's own stack)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from devtools.harness.procs import free_port, wait_until_serving

ROOT = Path(__file__).resolve().parent.parent.parent


def _blocks() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Try it with grpcurl") : readme.index("## Security")]
    return re.findall(r"```sh\n(.*?)```", section, re.DOTALL)


def test_the_walkthrough_works_as_printed(tmp_path: Path) -> None:
    main_addr, by_hand_addr = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "AIJOB_LISTEN": main_addr,
        "AIJOB_METRICS_LISTEN": f"127.0.0.1:{free_port()}",
        "AIJOB_RUNTIME_METRICS_BASE_PORT": str(free_port()),
    }
    env.pop("DEEPSEEK_API_KEY", None)
    stack = subprocess.Popen(
        [sys.executable, "-m", "devtools.devstack", "run"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_serving(main_addr)
        deadline = time.monotonic() + 60
        while not (tmp_path / ".aijob" / "logs" / "runtime-2.log").exists():
            # The launcher starts the runtimes right after the scheduler answers.
            assert time.monotonic() < deadline, "the runtimes never started"
            time.sleep(0.05)
        outputs = []
        for block in _blocks():
            script = block.replace("127.0.0.1:50051", main_addr).replace(
                "127.0.0.1:50061", by_hand_addr
            )
            shell_env = {k: v for k, v in env.items() if not k.startswith("AIJOB_")}
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", script],
                cwd=tmp_path,
                env=shell_env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert done.returncode == 0, (
                f"{script}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
            )
            outputs.append(done.stdout)
    finally:
        stack.send_signal(signal.SIGINT)
        assert stack.wait(timeout=60) == 0
    first, by_hand = outputs
    assert '"status": "SERVING"' in first
    assert '"outcome": "cancel_requested"' in first
    assert '"lifecycle_status": "cancelled"' in first  # the watch saw the cancel land
    assert '"ai.job.cancelled"' in first  # the event stream
    assert '"cancel_requested": "1"' in first  # CancelUserJobs stopped the retried, running job
    assert '"result_idempotency_key"' in by_hand and '"lifecycle_status": "succeeded"' in by_hand

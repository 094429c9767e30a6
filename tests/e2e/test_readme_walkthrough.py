"""The grpcurl walkthrough (docs/grpcurl.md), run as printed against `make run`'s stack (only
the ports are changed, so the test can run beside a developer's own stack)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from devtools.harness.procs import free_port
from tests.support.stack import ROOT, running_stack


def _blocks() -> list[str]:
    walkthrough = (ROOT / "docs" / "grpcurl.md").read_text()
    return re.findall(r"```sh\n(.*?)```", walkthrough, re.DOTALL)


def test_the_walkthrough_works_as_printed(tmp_path: Path) -> None:
    by_hand_addr = f"127.0.0.1:{free_port()}"
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    outputs = []
    # The launcher's banner comes once the runtimes and the console are up.
    with running_stack(tmp_path) as stack:
        main_addr = stack.env["AIJOB_LISTEN"]
        shell_env = {k: v for k, v in stack.env.items() if not k.startswith("AIJOB_")}
        for block in _blocks():
            script = block.replace("127.0.0.1:50051", main_addr).replace(
                "127.0.0.1:50061", by_hand_addr
            )
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
    first, by_hand = outputs
    assert '"status": "SERVING"' in first
    assert '"outcome": "cancel_requested"' in first
    assert '"lifecycle_status": "cancelled"' in first  # the watch saw the cancel land
    assert '"ai.job.cancelled"' in first  # the event stream
    assert '"cancel_requested": "1"' in first  # CancelUserJobs stopped the retried, running job
    assert '"result_idempotency_key"' in by_hand and '"lifecycle_status": "succeeded"' in by_hand

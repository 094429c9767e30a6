"""What develops and tests the product is not shipped with it: the wheel and the Docker image hold
no scripted model, no harness and no dev stack, and the product's settings carry no
fault-injection switch (tests inject faults through ``devtools.faults``)."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from runtime_service.settings import RuntimeSettings
from scheduler_service.wiring.settings import SchedulerSettings

ROOT = Path(__file__).resolve().parents[2]
DEV_ONLY = ("devtools", "tests", "bench", "scripts")


@pytest.mark.slow
def test_the_wheel_holds_the_product_only(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    packages = {name.split("/")[0] for name in names if not name.startswith("aijob_engine-")}
    assert packages == {"aijob", "scheduler_service", "runtime_service", "shared"}
    shipped = "\n".join(names)
    for dev_only in ("scripted", "harness", "devstack", "faults"):
        assert dev_only not in shipped, dev_only


def test_the_image_copies_no_dev_tool() -> None:
    copied = re.findall(r"^COPY\s+(\S+)", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert copied and "scheduler_service" in copied
    for source in copied:
        assert source.split("/")[0] not in DEV_ONLY, source


def test_no_setting_injects_faults() -> None:
    for settings in (SchedulerSettings, RuntimeSettings):
        switches = [name for name in settings.model_fields if "fault" in name]
        assert switches == [], settings

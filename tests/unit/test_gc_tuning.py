"""The service processes' collector settings (shared/gc_tuning.py), in a child interpreter: a
test process must not freeze its own heap."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import gc
from shared.gc_tuning import YOUNG_THRESHOLD, settle_start_up_heap
before = gc.get_threshold()
settle_start_up_heap()
after = gc.get_threshold()
assert gc.get_freeze_count() > 1000, gc.get_freeze_count()
assert after == (YOUNG_THRESHOLD, before[1], before[2]), (before, after)
print("ok")
"""


def test_start_up_heap_is_frozen_and_the_young_generation_collected_less_often() -> None:
    found = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=False, timeout=60
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "ok"

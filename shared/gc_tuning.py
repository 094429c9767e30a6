"""The cycle collector tuned for a long-running service process.

Measured in a scheduler's create and drain (docs/performance.md, "CreateJob's round trips, the
collector, and two whole runs"): with CPython's defaults the full collections walked every
module, descriptor and compiled statement loaded at start-up (about 60 ms each) and the young
generation was collected every 700 allocations; together about a twentieth of the process's
CPU. What is loaded before serving lives as long as the process, so it is moved out of the
collector's sight (``gc.freeze``), and the young generation is collected less often: fewer
collections, and fewer short-lived objects promoted for the older generations to walk again.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "settle_start_up_heap"]

#: Allocations (net of frees) between two young-generation collections; CPython's default is 700.
YOUNG_THRESHOLD = 5_000


def settle_start_up_heap() -> None:
    """Collect once, freeze what survives (it stays for the process's life) and raise the
    young generation's threshold. Called by a service's ``__main__`` once it has imported and
    built what it serves with, never by a library or a test process."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)

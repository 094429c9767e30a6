"""``make bench``: throughput against the database ceiling, then dispatch latency; one table and
``bench/results/latest.json``. The peer queue (PgQueuer) and the scale runs are not built yet
(see docs/performance.md); their keys are null."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from bench import lease_latency, throughput


async def main() -> None:
    figures: dict[str, float | None] = {}
    figures.update(await throughput.main())
    figures.update(await lease_latency.main())
    figures["peer_jobs_per_s"] = None
    out = Path(__file__).parent / "results" / "latest.json"
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    asyncio.run(main())

"""The overload storm: a provider that holds calls open, and no limit configured.

The scripted model behaves as DeepSeek does under load (``--overload 8``): past 8 calls in
progress it holds the others open with keep-alive comments until a place frees. No operator set
a limit on the model key. 200 ``synthetic_echo`` jobs run on 3 real runtime processes x 16
slots, each call taking ``AIJOB_BENCH_LLM_LATENCY_MS`` once it has a place. The scheduler has to
find the provider's capacity by itself: the key's window starts small (slow start) and a first
token that comes much later than the key's baseline halves it.

    python -m bench.llm_overload

The unloaded time to first token is measured first, through the same engine, with jobs run one at
a time. Figures: ``llm_overload_jobs``, ``llm_overload_failed``, ``llm_overload_open_calls_mean``
(the fleet's calls open at the provider — in progress plus held — sampled every 50 ms over the
second half of the storm), ``llm_overload_open_calls_max``, ``llm_overload_held`` (calls the
provider held at all), ``llm_overload_ttft_unloaded_ms``, ``llm_overload_ttft_p95_ms``,
``llm_overload_ttft_p95_vs_unloaded`` (goal <= 2), ``llm_overload_makespan_s``.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any, cast

from sqlalchemy import Table, select

from bench.llm_storm import LATENCY_MS, RUNTIMES, SLOTS, create_jobs, finished, run_storm
from bench.sizes import size
from devtools.harness import tokens
from devtools.harness.runtime_client import JobClient
from devtools.scripted_model import Overload, ScriptedModelServer
from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.db.models import AiJob, AiUsageLog

PLACES, WARMUP = 8, 5
JOBS = size("LLM_OVERLOAD_JOBS", 200, 20)
_jobs = cast(Table, AiJob.__table__)
_usage = cast(Table, AiUsageLog.__table__)


async def _first_tokens(engine: Any, user: str) -> list[int]:
    query = (
        select(_usage.c.firstTokenMs)
        .where(_usage.c.userId == user, _usage.c.firstTokenMs.is_not(None))
        .order_by(_usage.c.createdAt)
    )
    async with engine.connect() as conn:
        return [int(ms) for ms in (await conn.execute(query)).scalars()]


async def _sample(server: ScriptedModelServer, samples: list[tuple[float, int]]) -> None:
    """The fleet's calls open at the provider, every 50 ms (the bench's own clock)."""
    while True:
        stats = server.state.stats()
        samples.append((time.perf_counter(), int(stats["in_progress"]) + int(stats["holding"])))
        await asyncio.sleep(0.05)


async def _storm(url: str, address: str, server: ScriptedModelServer) -> dict[str, float]:
    channel = tokens.channel(address)
    client = JobClient(channel, "overload-caller")
    engine = create_engine(url, pool_size=2)
    samples: list[tuple[float, int]] = []
    try:
        for done in range(1, WARMUP + 1):  # one at a time: the provider is idle
            await create_jobs(client, ["warm-up"])
            await finished(engine, done)
        unloaded = statistics.median(await _first_tokens(engine, "warm-up"))
        sampler = asyncio.ensure_future(_sample(server, samples))
        started = time.perf_counter()
        await create_jobs(client, ["overload-batch"] * JOBS)
        ended = await finished(engine, WARMUP + JOBS)
        sampler.cancel()
        async with engine.connect() as conn:
            statuses = list(
                (
                    await conn.execute(
                        select(_jobs.c.lifecycleStatus).where(_jobs.c.userId == "overload-batch")
                    )
                ).scalars()
            )
        storm = await _first_tokens(engine, "overload-batch")
    finally:
        await engine.dispose()
        await channel.close(None)
    settled = [open_calls for at, open_calls in samples if at >= (started + ended) / 2]
    p95 = statistics.quantiles(storm, n=20)[-1]
    stats = server.state.stats()
    return {
        "llm_overload_jobs": float(JOBS),
        "llm_overload_failed": float(sum(status != "succeeded" for status in statuses)),
        "llm_overload_open_calls_mean": statistics.fmean(settled),
        "llm_overload_open_calls_max": float(stats["max_open"]),
        "llm_overload_held": float(stats.get("held", 0)),
        "llm_overload_ttft_unloaded_ms": float(unloaded),
        "llm_overload_ttft_p95_ms": p95,
        "llm_overload_ttft_p95_vs_unloaded": p95 / unloaded,
        "llm_overload_makespan_s": ended - started,
    }


async def main() -> dict[str, float]:
    server = ScriptedModelServer(
        fault=f"latency:{LATENCY_MS}", overload=Overload(PLACES, hold_s=600.0, keepalive_s=1.0)
    )
    title = (
        f"overload storm: {JOBS} jobs, {RUNTIMES} runtimes x {SLOTS} slots, a model that holds "
        f"calls past {PLACES} in progress, no limit configured, {LATENCY_MS} ms a call"
    )
    return await run_storm(server, _storm, title)


if __name__ == "__main__":
    asyncio.run(main())

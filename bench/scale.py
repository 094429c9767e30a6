"""Scale: the drain with 1, 2, 4 and 8 runtimes on one scheduler and with 4 runtimes on two
replicas; then one scheduler holding 1,000 idle Poll streams, its memory and CPU at rest.

    python -m bench.scale          # AIJOB_BENCH_SCALE_JOBS (default 1000) jobs per drain
"""

from __future__ import annotations

import asyncio
import urllib.request

import grpc
import psutil

from bench.databases import throwaway_database
from bench.sizes import SMOKE, size, span_s
from bench.throughput import drain
from devtools.harness.procs import free_port, spawn_schedulers
from devtools.harness.runtime_client import ClientRuntime
from devtools.harness.waiting import eventually

JOBS = size("SCALE_JOBS", 1000, 100)
IDLE_STREAMS = size("IDLE_STREAMS", 1000, 20)
REST_S = span_s("REST_S", 5.0, 0.5)
#: (runtimes, scheduler replicas); a smoke run takes the ends.
SHAPES = [(1, 1), (4, 2)] if SMOKE else [(1, 1), (2, 1), (4, 1), (8, 1), (4, 2)]


async def drains(jobs: int) -> dict[str, float]:
    figures = {}
    print(f"\nscale, {jobs} jobs per drain, 32 slots per runtime\n")
    for runtimes, replicas in SHAPES:
        async with throwaway_database() as url:
            rate = (await drain(url, jobs, runtimes=runtimes, replicas=replicas)).drain_jobs_per_s
        name = f"{runtimes} runtime{'s' if runtimes > 1 else ''}, {replicas} scheduler"
        print(f"{name + ('s' if replicas > 1 else ''):30} {rate:10.0f} jobs/s")
        figures[f"scale_{runtimes}rt_{replicas}sched_jobs_per_s"] = rate
    return figures


async def idle_streams() -> dict[str, float]:
    """RSS and CPU of one scheduler before and while it holds IDLE_STREAMS idle Poll streams."""
    async with throwaway_database() as url:
        metrics_address = f"127.0.0.1:{free_port()}"
        env = {"AIJOB_METRICS_LISTEN": metrics_address}
        with spawn_schedulers(url, 1, env=env) as (scheduler,):
            process = psutil.Process(scheduler.process.pid)
            rss_before = process.memory_info().rss
            channel = grpc.aio.insecure_channel(scheduler.address)
            runtimes = [ClientRuntime(channel, f"idle-{i}", slots=1) for i in range(IDLE_STREAMS)]
            try:
                for runtime in runtimes:
                    await runtime.connect()
                await eventually(lambda: _streams_open(metrics_address, IDLE_STREAMS))
                cpu = await _cpu_at_rest(process)
                rss_after = process.memory_info().rss
            finally:
                for runtime in runtimes:
                    await runtime.close()
                await channel.close(None)
    per_stream_kib = (rss_after - rss_before) / IDLE_STREAMS / 1024
    print(f"\n{IDLE_STREAMS} idle Poll streams on one scheduler\n")
    before_mib, after_mib = rss_before / 2**20, rss_after / 2**20
    print(f"{'RSS before / with the streams':30} {before_mib:6.0f} / {after_mib:.0f} MiB")
    print(f"{'per stream':30} {per_stream_kib:6.1f} KiB")
    print(f"{'CPU at rest with the streams':30} {cpu:6.1f} % of one core")
    return {
        "idle_streams": float(IDLE_STREAMS),
        "idle_streams_rss_mib": rss_after / 2**20,
        "idle_streams_rss_per_stream_kib": per_stream_kib,
        "idle_streams_cpu_percent": cpu,
    }


async def _streams_open(metrics_address: str, expected: int) -> bool:
    """Whether the scheduler's aijob_poll_streams gauge reads ``expected``."""
    body = await asyncio.to_thread(_get, f"http://{metrics_address}/metrics")
    return f"aijob_poll_streams {float(expected)}" in body


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


async def _cpu_at_rest(process: psutil.Process) -> float:
    process.cpu_percent(None)
    await asyncio.sleep(REST_S)  # a measuring window, not synchronisation
    return process.cpu_percent(None)


async def main(jobs: int = JOBS) -> dict[str, float]:
    return {**await drains(jobs), **await idle_streams()}


if __name__ == "__main__":
    asyncio.run(main())

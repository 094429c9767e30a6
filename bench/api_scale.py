"""The job API at scale: bulk create against CreateJob, idle WatchJob and
SubscribeEvents streams (their database statements and the scheduler's CPU at rest), another
user's GetJob while 2,000 watchers are open, and the drain with ``AIJOB_WORKERS=2``.

    python -m bench.api_scale     # AIJOB_BENCH_BULK_JOBS (5000), AIJOB_BENCH_IDLE_S (20)
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import grpc
import psutil
from google.protobuf import json_format

from bench import throughput
from bench.databases import throwaway_database
from bench.inflight import _connect, _insert_jobs, _scalar
from bench.sizes import size, span_s
from devtools.harness.procs import spawn_schedulers
from devtools.harness.runtime_client import JobClient
from shared.gen.aijob.v1 import job_service_pb2 as job_pb

BULK_JOBS = size("BULK_JOBS", 5000, 200)
IDLE_S = span_s("IDLE_S", 20, 1)
SETTLE_S = span_s("SETTLE_S", 2, 0.5)
BULK_ITEMS, BULK_CALLERS = 100, 4
WATCHERS, CROWD = size("WATCHERS", 1_000, 20), size("CROWD", 2_000, 40)
SUBSCRIBERS = size("SUBSCRIBERS", 200, 10)
GETS = 200
#: Separate connections, so the kernel can spread them over AIJOB_WORKERS processes.
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


async def main() -> dict[str, float]:
    figures = await _bulk_create()
    figures |= await _idle_streams()
    figures |= await _workers_drain()
    print(f"\njob API at scale ({BULK_JOBS} jobs, {IDLE_S:.0f} s idle windows)\n")
    for key, value in figures.items():
        print(f"{key:44} {value:10.1f}")
    return figures


async def _bulk_create() -> dict[str, float]:
    async with throwaway_database() as url:
        with spawn_schedulers(url, 1) as (scheduler,):
            channel = grpc.aio.insecure_channel(scheduler.address)
            try:
                client = JobClient(channel, "bench-bulk")
                semaphore = asyncio.Semaphore(BULK_CALLERS)

                async def call(start: int) -> None:
                    items = []
                    for index in range(start, min(start + BULK_ITEMS, BULK_JOBS)):
                        job = job_pb.CreateJobRequest(job_type="synthetic_echo")
                        json_format.ParseDict({"i": index}, job.snapshot)
                        items.append(job_pb.CreateJobsItem(user_id=f"bench-{index % 64}", job=job))
                    async with semaphore:
                        reply = await client.stub.CreateJobs(
                            job_pb.CreateJobsRequest(items=items), metadata=client.metadata
                        )
                    assert all(r.status.code == 0 for r in reply.results)

                started = time.perf_counter()
                await asyncio.gather(*(call(s) for s in range(0, BULK_JOBS, BULK_ITEMS)))
                bulk = BULK_JOBS / (time.perf_counter() - started)
            finally:
                await channel.close(None)
    async with throwaway_database() as url:
        with spawn_schedulers(url, 1) as (scheduler,):
            channel = grpc.aio.insecure_channel(scheduler.address)
            try:
                single = await throughput._create([channel], BULK_JOBS)
            finally:
                await channel.close(None)
    return {
        "ours_create_single_jobs_per_s": single,
        "ours_create_bulk_jobs_per_s": bulk,
        "bulk_vs_single_create": bulk / single,
    }


async def _idle_streams() -> dict[str, float]:
    figures: dict[str, float] = {}
    async with throwaway_database() as url:
        conn = await _connect(url)
        try:
            await _insert_jobs(conn, CROWD)
            with spawn_schedulers(url, 1) as (scheduler,):
                process = psutil.Process(scheduler.process.pid)
                channels = [
                    grpc.aio.insecure_channel(scheduler.address, options=OWN_CONNECTION)
                    for _ in range(4)
                ]
                try:
                    figures |= await _watch(conn, channels, process)
                    figures |= await _subscribe(conn, channels, process)
                finally:
                    for channel in channels:
                        await channel.close(None)
        finally:
            conn.close()
    return figures


async def _at_rest(conn: Any, process: psutil.Process) -> tuple[float, float]:
    """(database statements/s, scheduler CPU %) over the idle window."""
    questions = "SHOW GLOBAL STATUS LIKE 'Questions'"
    before = await _scalar(conn, questions)
    process.cpu_percent(None)
    await asyncio.sleep(IDLE_S)  # the window at rest being measured
    cpu = process.cpu_percent(None)
    return (await _scalar(conn, questions) - before - 2) / IDLE_S, cpu


async def _get_p50_ms(channel: grpc.aio.Channel, job_id: str) -> float:
    client = JobClient(channel, "someone-else")
    times = []
    for _ in range(GETS):
        started = time.perf_counter()
        await client.get(job_id)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def _open_watchers(
    channels: list[grpc.aio.Channel], job_ids: list[str], count: int
) -> list[Any]:
    clients = [JobClient(c, "bench") for c in channels]
    calls = []
    for index in range(count):
        client = clients[index % len(clients)]
        call = client.stub.WatchJob(
            job_pb.WatchJobRequest(job_id=job_ids[index % len(job_ids)]), metadata=client.metadata
        )
        calls.append(call)
    for call in calls:
        await call.read()  # the job as it is: the stream is open and idle from here
    return calls


async def _watch(
    conn: Any, channels: list[grpc.aio.Channel], process: psutil.Process
) -> dict[str, float]:
    async with conn.cursor() as cur:
        await cur.execute("SELECT id FROM AiAnalysisJob ORDER BY id")
        job_ids = [row[0] for row in await cur.fetchall()]
    other = await JobClient(channels[0], "someone-else").create()
    idle_get = await _get_p50_ms(channels[0], other.job_id)
    calls = await _open_watchers(channels, job_ids, WATCHERS)
    try:
        statements, cpu = await _at_rest(conn, process)
        calls += await _open_watchers(channels, job_ids[WATCHERS:], CROWD - WATCHERS)
        crowded_get = await _get_p50_ms(channels[0], other.job_id)
    finally:
        for call in calls:
            call.cancel()
    return {
        "watch_streams": float(WATCHERS),
        "watch_idle_db_statements_per_s": statements,
        "watch_idle_cpu_percent": cpu,
        "getjob_p50_ms_idle": idle_get,
        "getjob_p50_ms_with_2000_watchers": crowded_get,
    }


async def _subscribe(
    conn: Any, channels: list[grpc.aio.Channel], process: psutil.Process
) -> dict[str, float]:
    clients = [JobClient(c, "bench") for c in channels]
    calls = [
        clients[i % len(clients)].stub.SubscribeEvents(
            job_pb.SubscribeEventsRequest(), metadata=clients[i % len(clients)].metadata
        )
        for i in range(SUBSCRIBERS)
    ]
    try:
        await asyncio.sleep(SETTLE_S)  # let every stream subscribe before the window opens
        statements, cpu = await _at_rest(conn, process)
    finally:
        for call in calls:
            call.cancel()
    return {
        "subscribe_streams": float(SUBSCRIBERS),
        "subscribe_idle_db_statements_per_s": statements,
        "subscribe_idle_cpu_percent": cpu,
    }


async def _workers_drain() -> dict[str, float]:
    jobs = throughput.JOBS
    async with throwaway_database() as url:
        with spawn_schedulers(url, 1, env={"AIJOB_WORKERS": "2"}) as (scheduler,):
            channels = [
                grpc.aio.insecure_channel(scheduler.address, options=OWN_CONNECTION)
                for _ in range(throughput.RUNTIMES)
            ]
            try:
                await throughput._create(channels, jobs)
                rate = await throughput._drain(
                    channels, jobs, throughput.RUNTIMES, throughput.SLOTS, True
                )
            finally:
                for channel in channels:
                    await channel.close(None)
    return {"workers_2_jobs_per_s": rate}


if __name__ == "__main__":
    asyncio.run(main())

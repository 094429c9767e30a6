"""A drain on a database cluster, with an optional node kill mid-way: used by the Galera test
(correctness) and by ``bench.galera`` (failover time, rate against one MariaDB).

Two scheduler processes, eight runtimes on the generated client (four per scheduler, 16 slots
each), ``jobs`` synthetic_echo jobs created in bulk first. A runtime's report that meets
UNAVAILABLE (the database failing over) is sent again with backoff, as the real runtime does;
every status a call answered is counted, so a test can assert none was INTERNAL.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from google.protobuf import json_format

from devtools.harness import tokens
from devtools.harness.procs import spawn_schedulers
from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output, working
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import types_pb2

__all__ = ["DrainResult", "drain"]

RUNTIMES_PER_SCHEDULER = 4
SLOTS = 16
_RETRIED = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


@dataclass
class DrainResult:
    seconds: float
    #: Every (job id, attempt) leased, with how many times.
    leased: Counter[tuple[str, int]]
    #: Status codes answered to the runtimes' reports and the creates (OK included).
    codes: Counter[str] = field(default_factory=Counter)


async def _created(client: JobClient, count: int, codes: Counter[str]) -> None:
    for start in range(0, count, 500):
        items = []
        for n in range(start, min(count, start + 500)):
            job = job_pb.CreateJobRequest(job_type="synthetic_echo")
            json_format.ParseDict({"n": n}, job.snapshot)
            items.append(job_pb.CreateJobsItem(user_id=f"user-{n % 50}", job=job))
        reply = await client.stub.CreateJobs(
            job_pb.CreateJobsRequest(items=items), metadata=client.metadata, timeout=120
        )
        for result in reply.results:
            codes[grpc.StatusCode.OK.name if result.status.code == 0 else "CREATE_REFUSED"] += 1


async def _submit(runtime: ClientRuntime, lease: types_pb2.Lease, codes: Counter[str]) -> None:
    """The result on the Poll stream (group commit, as the real runtime sends it), again with
    backoff while its ack says UNAVAILABLE."""
    backoff = 0.1
    while True:
        ack = await runtime.submit_on_stream(lease, echo_output(lease))
        code = grpc.StatusCode.OK if ack.status.code == 0 else _code_of(ack.status.code)
        codes[code.name] += 1
        if code is grpc.StatusCode.OK:
            return
        if code not in _RETRIED:
            raise RuntimeError(f"result refused: {code.name} {ack.status.message}")
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, 2.0)


def _code_of(value: int) -> grpc.StatusCode:
    return next((c for c in grpc.StatusCode if c.value[0] == value), grpc.StatusCode.UNKNOWN)


async def drain(
    database_url: str,
    jobs: int,
    log_dir: Path,
    *,
    env: Mapping[str, str] | None = None,
    midway: Callable[[], Awaitable[None]] | None = None,
    midway_after: int = 0,
    afterwards: Callable[[], Awaitable[None]] | None = None,
) -> DrainResult:
    """Drain ``jobs`` jobs; once ``midway_after`` have finished, ``midway`` runs (a node kill)
    while the drain goes on; ``afterwards`` runs once all are done, the schedulers still up."""
    codes: Counter[str] = Counter()
    await asyncio.to_thread(log_dir.mkdir, parents=True, exist_ok=True)
    with spawn_schedulers(database_url, 2, log_dir=log_dir, env=env) as schedulers:
        channels = [tokens.channel(s.address) for s in schedulers]
        runtimes = [
            ClientRuntime(channel, f"rt-{s}-{r}", slots=SLOTS)
            for s, channel in enumerate(channels)
            for r in range(RUNTIMES_PER_SCHEDULER)
        ]
        await _created(JobClient(channels[0], "drain-caller"), jobs, codes)
        finished = 0
        all_done, half_way = asyncio.Event(), asyncio.Event()

        async def finish(runtime: ClientRuntime, lease: types_pb2.Lease) -> None:
            nonlocal finished
            await _submit(runtime, lease, codes)
            finished += 1
            if finished >= midway_after:
                half_way.set()
            if finished == jobs:
                all_done.set()

        started = time.perf_counter()
        try:
            async with working(runtimes, finish):
                if midway is not None:
                    await asyncio.wait_for(half_way.wait(), timeout=300)
                    await midway()
                await asyncio.wait_for(all_done.wait(), timeout=300)
                seconds = time.perf_counter() - started
                if afterwards is not None:
                    await afterwards()
        finally:
            for channel in channels:
                await channel.close(None)
    leased = Counter(pair for runtime in runtimes for pair in runtime.received)
    return DrainResult(seconds, leased, codes)

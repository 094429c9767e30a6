"""Job trees against flat jobs: the same 1,000 units of work drained by the same fleet, once as
1,000 flat ``synthetic_echo`` jobs and once as 100 trees of 10 children (each parent then runs
its own call, as a type without a data join does), in adjacent pairs on one scheduler whose order
alternates from pair to pair.

* ``tree_drain_vs_flat`` — the median over the pairs of (flat drain time / tree drain time):
  what waiting parents, fan-in and the parents' own calls cost a drain (goal >= 0.8).
* ``tree_fan_in_p99_ms`` — from the last child's result commit to its parent's success, p99
  over the trees of every pair, read from the rows' database times (goal <= 50): the join
  puts the parent back at its old place in its user's turn, so it is leased at once.

    python -m bench.trees          # AIJOB_BENCH_TREES (default 100), AIJOB_BENCH_TREE_PAIRS (3)
"""

from __future__ import annotations

import asyncio
import statistics
import uuid

import grpc
from sqlalchemy import func, select

from bench.databases import throwaway_database
from bench.sizes import size
from bench.throughput import RUNTIMES, SLOTS, _create_bulk, _drain
from devtools.harness.procs import scheduler_processes
from devtools.harness.runtime_client import JobClient
from scheduler_service.sql.db.engine import create_engine
from scheduler_service.sql.db.models import AiJob
from shared.gen.aijob.v1 import job_service_pb2 as job_pb

TREES = size("TREES", 100, 4)
CHILDREN = 10
PAIRS = size("TREE_PAIRS", 3, 1)
#: Whole trees per CreateJobs call (a call takes at most 100 items).
TREES_PER_CALL = 100 // (CHILDREN + 1)

_JOBS = AiJob.__table__


async def _create_trees(channel: grpc.aio.Channel, trees: int) -> list[str]:
    """``trees`` parents of CHILDREN children each, every tree in one CreateJobs call's items
    (children name their parent ``#N``); the parents' ids."""
    client = JobClient(channel, "bench-trees")
    parents: list[str] = []
    for start in range(0, trees, TREES_PER_CALL):
        items: list[job_pb.CreateJobsItem] = []
        for tree in range(start, min(start + TREES_PER_CALL, trees)):
            user = f"bench-{tree % 64}"
            parent_item = len(items)
            for child in range(CHILDREN + 1):
                job = job_pb.CreateJobRequest(
                    job_type="synthetic_echo",
                    idempotency_key=uuid.uuid4().hex,
                    parent_job_id=f"#{parent_item}" if child else "",
                )
                job.snapshot.update({"tree": tree, "child": child})
                items.append(job_pb.CreateJobsItem(user_id=user, job=job))
        reply = await client.stub.CreateJobs(
            job_pb.CreateJobsRequest(items=items), metadata=client.metadata, timeout=120
        )
        assert all(result.status.code == 0 for result in reply.results), reply.results
        parents += [
            reply.results[i].job.job_id
            for i in range(len(items))
            if not reply.results[i].job.parent_job_id
        ]
    return parents


async def _fan_in_ms(url: str, parents: list[str]) -> list[float]:
    """Each parent's success after its last child's, in milliseconds (database times)."""
    child = _JOBS.alias("child")
    last_child = (
        select(child.c.parentJobId, func.max(child.c.finishedAt).label("last"))
        .where(child.c.parentJobId.in_(parents))
        .group_by(child.c.parentJobId)
        .subquery()
    )
    query = select(_JOBS.c.finishedAt, last_child.c.last).join(
        last_child, last_child.c.parentJobId == _JOBS.c.id
    )
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(query)).all()
    finally:
        await engine.dispose()
    return [(done - last).total_seconds() * 1000 for done, last in rows]


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


async def main() -> dict[str, float]:
    units = TREES * CHILDREN
    flat_rates: list[float] = []
    tree_rates: list[float] = []
    fan_ins: list[float] = []
    async with throwaway_database() as url:
        with scheduler_processes(url, 1) as addresses:
            channels = [grpc.aio.insecure_channel(address) for address in addresses]
            try:
                for index in range(PAIRS):
                    for trees in (False, True) if index % 2 == 0 else (True, False):
                        if trees:
                            parents = await _create_trees(channels[0], TREES)
                            # Every child and every parent's own call is a result.
                            rate = await _drain(channels, units + TREES, RUNTIMES, SLOTS, True)
                            tree_rates.append(rate * units / (units + TREES))
                            fan_ins += await _fan_in_ms(url, parents)
                        else:
                            await _create_bulk(channels[0], units)
                            flat_rates.append(await _drain(channels, units, RUNTIMES, SLOTS, True))
            finally:
                for channel in channels:
                    await channel.close(None)
    ratio = statistics.median(t / f for t, f in zip(tree_rates, flat_rates, strict=True))
    fan_in_p99 = _p99(fan_ins)
    print(f"\ntrees, {TREES} x {CHILDREN} children against {units} flat jobs, {PAIRS} pairs\n")
    print(f"{'flat drain (median)':44} {statistics.median(flat_rates):10.0f} jobs/s")
    print(f"{'tree drain, children (median)':44} {statistics.median(tree_rates):10.0f} jobs/s")
    print(f"{'  trees / flat (median of pairs)':44} {ratio:10.2f}")
    print(f"{'fan-in: last child -> parent succeeded p99':44} {fan_in_p99:10.1f} ms")
    return {
        "tree_flat_jobs_per_s": statistics.median(flat_rates),
        "tree_children_per_s": statistics.median(tree_rates),
        "tree_drain_vs_flat": ratio,
        "tree_fan_in_p50_ms": statistics.median(fan_ins),
        "tree_fan_in_p99_ms": fan_in_p99,
    }


if __name__ == "__main__":
    asyncio.run(main())

"""Queue lanes on a runtime: System A's ``ai-analysis`` runs one job at a time per
runtime unless configured, whatever the runtime's slots; other queues are not held back."""

from __future__ import annotations

import asyncio

from runtime_service.lanes import DEFAULT_QUEUE_SLOTS, QueueLanes


async def _most_at_once(lanes: QueueLanes, job_type: str, attempts: int) -> int:
    inside = most = 0
    release = asyncio.Event()
    entered = asyncio.Event()

    async def attempt() -> None:
        nonlocal inside, most
        async with lanes.lane(job_type):
            inside += 1
            most = max(most, inside)
            entered.set()
            await release.wait()
            inside -= 1

    tasks = [asyncio.ensure_future(attempt()) for _ in range(attempts)]
    await entered.wait()
    for _ in range(attempts):  # let every attempt that can enter do so
        await asyncio.sleep(0)
    held_at_once = most
    release.set()
    await asyncio.gather(*tasks)
    return held_at_once


async def test_the_analysis_queue_runs_one_at_a_time_by_default() -> None:
    assert DEFAULT_QUEUE_SLOTS == {"ai-analysis": 1}
    assert await _most_at_once(QueueLanes(DEFAULT_QUEUE_SLOTS), "active-recall", 3) == 1


async def test_a_configured_lane_and_other_queues() -> None:
    lanes = QueueLanes({"ai-analysis": 2})
    assert await _most_at_once(lanes, "feynman-evaluation", 4) == 2
    assert await _most_at_once(lanes, "synthetic_echo", 4) == 4
    assert await _most_at_once(lanes, "no-such-type", 3) == 3

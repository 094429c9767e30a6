"""The report batcher: one batch at a time, so reports that arrive while a batch commits gather
into the next one instead of each opening a transaction of its own."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from scheduler_service.services.group_commit import ReportBatcher
from scheduler_service.services.reports import Report, ReportAnswer, ResultSubmission, SubmitOutcome


class HeldGroup:
    """Stands for the group commit: records each batch and holds the first until released."""

    def __init__(self) -> None:
        self.batches: list[int] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def apply(self, reports: Sequence[Report]) -> list[ReportAnswer]:
        self.batches.append(len(reports))
        self.started.set()
        if len(self.batches) == 1:
            await self.release.wait()
        return [SubmitOutcome(f"key-{r.job_id}", duplicate=False) for r in reports]


def _report(index: int) -> ResultSubmission:
    return ResultSubmission(f"job-{index}", 1, "rt-1", "0" * 64, "{}", None)


async def test_reports_arriving_during_a_commit_form_the_next_batch() -> None:
    group = HeldGroup()
    batcher = ReportBatcher(group, window_s=0, max_batch=10)  # type: ignore[arg-type]
    first = asyncio.ensure_future(batcher.submit(_report(0)))
    await group.started.wait()  # the first batch runs, held
    later: list[asyncio.Future[Any]] = [
        asyncio.ensure_future(batcher.submit(_report(i))) for i in range(1, 11)
    ]
    await asyncio.wait(later, timeout=0)  # one turn of the loop: every submit runs to its wait
    # The tenth filled a batch, which must not start while the first is still committing.
    assert group.batches == [1]
    group.release.set()
    answers = await asyncio.gather(first, *later)
    assert group.batches == [1, 10]
    assert [a.result_idempotency_key for a in answers] == [f"key-job-{i}" for i in range(11)]


async def test_a_full_batch_is_split_at_the_maximum() -> None:
    group = HeldGroup()
    group.release.set()
    batcher = ReportBatcher(group, window_s=0, max_batch=4)  # type: ignore[arg-type]
    await asyncio.gather(*(batcher.submit(_report(i)) for i in range(10)))
    assert sum(group.batches) == 10 and max(group.batches) <= 4

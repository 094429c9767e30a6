"""Warm-up of shared prompt prefixes on the in-memory tables (as sql/warmup_store.py)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import timedelta

from scheduler_service.ports.warmups import Group, WarmupStore
from tests.support.fake_state import FakeTables

_ACTIVE = ("queued", "running")


class FakeWarmupStore(FakeTables, WarmupStore):
    def _group(self, row: dict[str, object]) -> Group:
        return (str(row["userId"]), str(row["prefixKey"]))

    async def warming(
        self, groups: Collection[Group], within_s: float, warm_for_s: float
    ) -> tuple[set[Group], set[Group]]:
        since = self.now - timedelta(seconds=within_s)
        warm_since = self.now - timedelta(seconds=warm_for_s)
        rows = [
            r
            for r in self.state.jobs.values()
            if r["prefixKey"] is not None and self._group(r) in groups
        ]
        warm = {
            self._group(r)
            for r in rows
            if r["prefixWarmedAt"] is not None and r["prefixWarmedAt"] >= warm_since
        }
        warming = {
            self._group(r)
            for r in rows
            if r["lifecycleStatus"] in _ACTIVE and r["createdAt"] >= since
        }
        return warming - warm, warm

    async def hold(self, job_ids: Sequence[str], wait_s: float) -> None:
        for job_id in job_ids:
            self.state.jobs[job_id]["availableAt"] = self.ms_from_now(round(wait_s * 1000))

    async def release(self, warmed: Mapping[str, Group]) -> list[str]:
        groups = set(warmed.values())
        for job_id in warmed:
            row = self.state.jobs[job_id]
            row["prefixWarmedAt"] = row["prefixWarmedAt"] or self.now
        released = []
        for job_id, row in self.state.jobs.items():
            if (
                row["prefixKey"] is not None
                and self._group(row) in groups
                and row["lifecycleStatus"] == "queued"
                and row["availableAt"] is not None
                and row["availableAt"] > self.now
            ):
                row["availableAt"] = self.now
                released.append(job_id)
        return released

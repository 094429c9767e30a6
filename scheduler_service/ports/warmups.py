"""Warm-up of shared prompt prefixes (core/warmup.py): which (user, prefix) groups have a job
warming them, holding new jobs back for a bounded wait, and letting them go once warm."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence

__all__ = ["Group", "WarmupStore"]

#: A user and a prompt prefix key.
Group = tuple[str, str]


class WarmupStore(ABC):
    @abstractmethod
    async def warming(
        self, groups: Collection[Group], within_s: float, warm_for_s: float
    ) -> tuple[set[Group], set[Group]]:
        """Of ``groups``: those warming (a job queued or running created within ``within_s``,
        and no first token told for the group), and those warm (a first token told for it
        within ``warm_for_s``)."""

    @abstractmethod
    async def hold(self, job_ids: Sequence[str], wait_s: float) -> None:
        """These new jobs become available ``wait_s`` from now, unless let go sooner."""

    @abstractmethod
    async def release(self, warmed: Mapping[str, Group]) -> list[str]:
        """The groups of ``warmed`` (a job this transaction locked, whose first token was
        told, to its group) are warm from now (those jobs are marked), and their queued jobs
        still held become available now; their ids."""

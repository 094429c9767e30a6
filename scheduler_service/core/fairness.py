"""Fair dispatch: users take turns within a priority. Pure.

Each new job gets a place, ``fairSeq``; the claim orders queued jobs by priority, then place,
then age. A user's places count up from their previous job's (``last``), so a user's backlog
stretches out over places while a user with nothing queued starts at the *floor*: one place
before the first job waiting at that priority. So a user who creates one job while another has
10,000 waiting is next in line, and from then on the two alternate (start-time fair queueing, with
the queue's head as virtual time). With nothing waiting, the floor is the newest place already
running, so that a user coming back after a long backlog starts level with the others and not
behind their own history.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Floor", "RunningCaps", "places"]


@dataclass(frozen=True, slots=True)
class Floor:
    """What the queue looks like at one priority when a job is created."""

    #: The lowest place among queued jobs, if any.
    head: int | None
    #: The highest place among running jobs, if any.
    running: int | None

    @property
    def place(self) -> int:
        if self.head is not None:
            return self.head - 1
        return self.running if self.running is not None else 0


def places(
    jobs: Sequence[tuple[str, int]],
    lasts: Mapping[str, int],
    floors: Mapping[int, Floor],
) -> tuple[list[int], dict[str, int]]:
    """The place of each (user, priority) job, in order, and each user's new last place. A user
    missing from ``lasts`` has no earlier place: their first job goes at the floor."""
    latest = dict(lasts)
    assigned: list[int] = []
    for user, priority in jobs:
        floor = floors[priority].place
        place = max(latest[user] + 1, floor) if user in latest else floor
        latest[user] = place
        assigned.append(place)
    return assigned, {user: latest[user] for user, _ in jobs}


@dataclass(frozen=True, slots=True)
class RunningCaps:
    """At most this many running jobs per user (0: no cap), with per-user overrides."""

    default: int = 0
    overrides: Mapping[str, int] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.default > 0 or any(cap > 0 for cap in self.overrides.values())

    def of(self, user: str) -> int:
        return self.overrides.get(user, self.default)

    def admit(
        self, candidates: Sequence[tuple[str, str]], running: Mapping[str, int], wanted: int
    ) -> list[str]:
        """The first ``wanted`` candidate (job id, user) pairs, in order, whose users stay within
        their caps counting what already runs and what this claim admits before them."""
        taken: Counter[str] = Counter(running)
        admitted: list[str] = []
        for job_id, user in candidates:
            if len(admitted) == wanted:
                break
            cap = self.of(user)
            if cap > 0 and taken[user] >= cap:
                continue
            taken[user] += 1
            admitted.append(job_id)
        return admitted

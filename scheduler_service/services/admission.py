"""Which new jobs a create admits: their own deadlines, and their users' caps, daily quota and
budget, judged under the users' gate locks (docs/architecture.md, *Limits*)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from scheduler_service.core.budgets import Budget, admit_within_budgets
from scheduler_service.core.commands import JobLimits
from scheduler_service.core.errors import InvalidRequestError, LimitExceededError, SchedulerError
from scheduler_service.core.records import NewJob
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.ports import Transaction
from shared.error_codes import ErrorCode

__all__ = ["ACTIVE_STATES", "Admission"]

#: The states whose jobs reserve their token estimate against a create's budget check.
ACTIVE_STATES = (
    LifecycleStatus.QUEUED.value,
    LifecycleStatus.RUNNING.value,
    LifecycleStatus.WAITING.value,
)


def _check_deadline(deadline: datetime | None, now: datetime | None) -> None:
    """A schedule-to-start deadline already past by the database clock could only expire."""
    if deadline is not None and now is not None and deadline <= now:
        raise InvalidRequestError("deadline is in the past", field="deadline")


def _budget_spent() -> LimitExceededError:
    return LimitExceededError(
        ErrorCode.BUDGET_EXCEEDED, "the daily budget is spent; it renews at midnight UTC"
    )


@dataclass(frozen=True, slots=True)
class Admission:
    limits: JobLimits
    #: The default daily budget of a user no operator set one for.
    budget: Budget

    def _over_limits(self, active_jobs: int, today: int, child: bool) -> LimitExceededError | None:
        # A tree counts once against the cap, as its root: its children are the tree's work,
        # and a user at the cap with a tree in flight still finishes it.
        if not child and active_jobs >= self.limits.max_active_jobs_per_user:
            return LimitExceededError(
                ErrorCode.TOO_MANY_JOBS,
                f"at most {self.limits.max_active_jobs_per_user} jobs may be queued or running",
            )
        if today >= self.limits.daily_job_quota_per_user:
            return LimitExceededError(
                ErrorCode.QUOTA_EXCEEDED,
                f"the daily quota of {self.limits.daily_job_quota_per_user} jobs is used up",
            )
        return None

    async def admitted(
        self, tx: Transaction, fresh: Sequence[tuple[int, str, NewJob]], enforce_limits: bool
    ) -> tuple[dict[int, SchedulerError], list[int]]:
        """Which of the new jobs pass their own deadlines and their users' caps and budgets
        (under the users' gate locks, so concurrent creates of a user cannot all pass the count
        or the budget together: each reserves its estimate, core/budgets.py): the refusals by
        index, and the accepted."""
        users = {user for _, user, _ in fresh}
        if enforce_limits and users:
            counts = dict(await tx.gates.lock_user_gates(users))
            standings = await tx.spend.budget_standings(users, self.budget, ACTIVE_STATES)
        else:
            counts, standings = {user: (0, 0) for user in users}, {}
        within = set(
            admit_within_budgets(
                [(str(index), user, job.token_estimate) for index, user, job in fresh], standings
            )
        )
        deadlines = any(job.deadline_at is not None for _, _, job in fresh)
        now = await tx.reads.clock() if deadlines else None
        refused: dict[int, SchedulerError] = {}
        accepted: list[int] = []
        for index, user, job in fresh:
            try:
                _check_deadline(job.deadline_at, now)
            except InvalidRequestError as past:
                refused[index] = past
                continue
            child = job.parent_job_id is not None
            refusal = self._over_limits(*counts[user], child) if enforce_limits else None
            if refusal is None and str(index) not in within:
                refusal = _budget_spent()
            if refusal is not None:
                refused[index] = refusal
                continue
            active, today = counts[user]
            counts[user] = (active + (0 if child else 1), today + 1)
            accepted.append(index)
        return refused, accepted

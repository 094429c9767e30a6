"""Per-user daily budgets. Pure.

A user's budget for a UTC day is tokens (prompt plus completion) and cost (micro-units of the
price table's currency); 0 is no limit. An operator may set a user's own (``AdminService.
PutUserBudget``); a part they left unset takes the settings' default. A user is *over* budget
once what they spent that day reached either part: CreateJob refuses them, and dispatch fails
their queued jobs instead of leasing them (the money a lease would spend is what the budget
forbids; a job left queued until midnight would hold the user's active-job places and surprise
whoever waits on it, so it ends, with its event, and can be created again the next day).

Spend is known only once a call ends, so the jobs not yet settled *reserve* their token estimates
(without them, concurrent creates could spend a budget many times over). A create is admitted
only if the user's spend plus the estimates of their queued and running jobs plus its own fits the
token budget; dispatch leases a job only if the spend plus the running jobs' estimates plus its own
fits. A user with nothing reserved may always start one job while the budget is not reached, so
the overspend is bounded by one job's estimate per slot, and no job waits for ever on a budget
that it alone would overrun.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["Budget", "Spend", "Standing"]


@dataclass(frozen=True, slots=True)
class Spend:
    tokens: int = 0
    cost_micros: int = 0


@dataclass(frozen=True, slots=True)
class Budget:
    daily_tokens: int = 0
    daily_cost_micros: int = 0

    @property
    def any(self) -> bool:
        return bool(self.daily_tokens or self.daily_cost_micros)

    def with_override(self, tokens: int | None, cost_micros: int | None) -> Budget:
        """An operator's budget for one user over this default: None takes the default."""
        return Budget(
            self.daily_tokens if tokens is None else tokens,
            self.daily_cost_micros if cost_micros is None else cost_micros,
        )

    def exceeded_by(self, spend: Spend) -> bool:
        return bool(
            (self.daily_tokens and spend.tokens >= self.daily_tokens)
            or (self.daily_cost_micros and spend.cost_micros >= self.daily_cost_micros)
        )


@dataclass(frozen=True, slots=True)
class Standing:
    """One user's budget today and what counts against it: the spend, and the token estimates
    of their jobs not yet settled."""

    budget: Budget
    spent: Spend = Spend()
    reserved_tokens: int = 0

    def admits(self, estimate_tokens: int) -> bool:
        """Whether one more job of ``estimate_tokens`` may be admitted."""
        if self.budget.exceeded_by(self.spent):
            return False
        if not self.budget.daily_tokens or not self.reserved_tokens:
            return True
        total = self.spent.tokens + self.reserved_tokens + estimate_tokens
        return total <= self.budget.daily_tokens

    def reserving(self, estimate_tokens: int) -> Standing:
        return replace(self, reserved_tokens=self.reserved_tokens + estimate_tokens)


def admit_within_budgets(
    candidates: list[tuple[str, str, int]], standings: dict[str, Standing]
) -> list[str]:
    """The ids of ``candidates`` (job id, user id, token estimate; best first) that fit their
    users' budgets when admitted in that order, each reserving its estimate."""
    admitted: list[str] = []
    for job_id, user_id, estimate in candidates:
        standing = standings.get(user_id)
        if standing is None:
            admitted.append(job_id)
        elif standing.admits(estimate):
            standings[user_id] = standing.reserving(estimate)
            admitted.append(job_id)
    return admitted

"""Per-user daily budgets. Pure.

A user's budget for a UTC day is tokens (prompt plus completion) and cost (micro-units of the
price table's currency); 0 is no limit. An operator may set a user's own (``AdminService.
PutUserBudget``); a part they left unset takes the settings' default. A user is *over* budget
once what they spent that day reached either part: CreateJob refuses them, and dispatch fails
their queued jobs instead of leasing them (the money a lease would spend is what the budget
forbids; a job left queued until midnight would hold the user's active-job places and surprise
whoever waits on it, so it ends, with its event, and can be created again the next day).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Budget", "Spend"]


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

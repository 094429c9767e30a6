"""The operators' side of billing: set a user's budget, read what a user used."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from scheduler_service.core import validation
from scheduler_service.core.budgets import Budget, Spend
from scheduler_service.core.errors import InvalidRequestError
from scheduler_service.core.model_keys import ModelKey
from scheduler_service.core.usage import UsageLine
from scheduler_service.ports import Transaction, UnitOfWork

__all__ = ["Billing", "UsageReport"]

#: The longest range GetUserUsage totals.
MAX_DAYS = 366


@dataclass(frozen=True, slots=True)
class UsageReport:
    first_day: date
    last_day: date
    total: UsageLine
    by_key: dict[ModelKey, UsageLine]
    budget: Budget
    today: Spend


def _day(text: str, field: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise InvalidRequestError(f"{field} must be a date, YYYY-MM-DD", field=field) from None


class Billing:
    def __init__(self, uow: UnitOfWork, budget: Budget, user_key_mode: str) -> None:
        self._uow = uow
        #: The default budget of a user no operator set one for.
        self._budget = budget
        self._user_key_mode = user_key_mode

    async def put_budget(self, user_id: str, tokens: int, cost_micros: int) -> Budget:
        """Set one user's daily budget (0: no limit); the budget now in force."""
        validation.user_id(user_id, "user_id")
        for value, field in ((tokens, "daily_tokens"), (cost_micros, "daily_cost_micros")):
            if value < 0:
                raise InvalidRequestError(f"{field} must be 0 or more", field=field)

        async def put(tx: Transaction) -> None:
            await tx.spend.put_budget(user_id, tokens, cost_micros)

        await self._uow.run(put)
        return Budget(tokens, cost_micros)

    async def usage(self, user_id: str, first: str, last: str) -> UsageReport:
        """The user's usage over UTC days ``first`` to ``last`` (both included; empty first is
        today, empty last is today or the first day, whichever is later), with their budget and
        today's spend."""
        validation.user_id(user_id, "user_id")

        async def read(tx: Transaction) -> UsageReport:
            today_start = await tx.spend.today()
            today = today_start.date()
            first_day = _day(first, "from_date") if first else today
            # "Since D": an empty last day is today, which is what an operator asking for usage
            # from a date means.
            last_day = _day(last, "to_date") if last else max(first_day, today)
            if last_day < first_day:
                raise InvalidRequestError("to_date is before from_date", field="to_date")
            if (last_day - first_day).days >= MAX_DAYS:
                raise InvalidRequestError(
                    f"from_date to to_date may span at most {MAX_DAYS} days", field="to_date"
                )
            start = datetime.combine(first_day, datetime.min.time())
            end = datetime.combine(last_day + timedelta(days=1), datetime.min.time())
            total, by_key = await tx.spend.usage_report(
                user_id,
                _like(start, today_start),
                _like(end, today_start),
                self._user_key_mode,
            )
            tokens, cost = await tx.spend.budget_of(user_id)
            spend = await tx.spend.spend_today(user_id)
            return UsageReport(
                first_day,
                last_day,
                total,
                by_key,
                self._budget.with_override(tokens, cost),
                spend,
            )

        return await self._uow.read(read)


def _like(moment: datetime, reference: datetime) -> datetime:
    """``moment`` with the time zone the database's datetimes come back with."""
    return moment.replace(tzinfo=UTC) if reference.tzinfo is not None else moment

"""The price table: what a model call costs, from its tokens and the window it started in. Pure.

Prices are micro-units of the table's currency per million tokens, as providers publish them, per
token class: prompt tokens that missed the provider's context cache, prompt tokens that hit it,
and completion tokens; each at an off-peak and a peak rate (DeepSeek bills calls that start in
its peak windows at twice the off-peak rate, :mod:`~scheduler_service.core.peak_hours`). The
scheduler prices every reported call with this table, so budgets and the usage API count one
currency whatever the runtimes were told; a model not in the table keeps the cost its runtime
reported. Aliases (``deepseek-chat``, ``deepseek-reasoner``, ``deepseek-flash``) take the price of
the model DeepSeek serves them with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from scheduler_service.core.peak_hours import PeakHours
from scheduler_service.core.usage import Usage
from shared.model_catalogue import canonical_model

__all__ = ["DEFAULT_PRICES", "ModelPrice", "PriceTable", "Rates"]


@dataclass(frozen=True, slots=True)
class Rates:
    """Micro-units per million tokens."""

    prompt: int
    cached_prompt: int
    completion: int

    def cost_micros(self, prompt_tokens: int, cached_tokens: int, completion_tokens: int) -> int:
        cached = min(max(0, cached_tokens), prompt_tokens)
        total = (
            (prompt_tokens - cached) * self.prompt
            + cached * self.cached_prompt
            + completion_tokens * self.completion
        )
        return -(-total // 1_000_000)  # rounded up: a call never costs less than it did


@dataclass(frozen=True, slots=True)
class ModelPrice:
    off_peak: Rates
    peak: Rates


#: DeepSeek's published prices (USD, api-docs.deepseek.com *Models & Pricing*), off-peak then
#: peak, per million tokens: V4 Flash 0.15 cache miss / 0.003 cache hit / 0.60 output, twice that
#: at peak; V4 Pro 0.66 / 0.022 / 1.98, twice that at peak.
DEFAULT_PRICES = (
    "deepseek-v4-flash=150000/3000/600000:300000/6000/1200000,"
    "deepseek-v4-pro=660000/22000/1980000:1320000/44000/3960000"
)


def _rates(entry: str, figures: str) -> Rates:
    parts = figures.split("/")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(
            "expected model=prompt/cached/completion[:peak prompt/cached/completion] "
            f"(micro-units per million tokens), got {entry!r}"
        )
    prompt, cached, completion = (int(p) for p in parts)
    return Rates(prompt, cached, completion)


@dataclass(frozen=True, slots=True)
class PriceTable:
    prices: Mapping[str, ModelPrice]
    #: When calls pay the peak rate; none: always off-peak.
    peak_hours: PeakHours = field(default_factory=lambda: PeakHours.parse(""))

    @classmethod
    def parse(cls, text: str, peak_hours: PeakHours | None = None) -> PriceTable:
        """``model=off-peak[:peak]`` entries, comma-separated; each rate ``prompt/cached/
        completion``. Without a peak rate, a model costs the same at every hour."""
        prices: dict[str, ModelPrice] = {}
        for entry in filter(None, (e.strip() for e in text.split(","))):
            model, sep, figures = entry.partition("=")
            if not sep or not model.strip():
                raise ValueError(f"expected model=prompt/cached/completion, got {entry!r}")
            off_peak, _, peak = figures.partition(":")
            rates = _rates(entry, off_peak)
            prices[model.strip()] = ModelPrice(rates, _rates(entry, peak) if peak else rates)
        return cls(prices, peak_hours or PeakHours.parse(""))

    def price_of(self, model: str) -> ModelPrice | None:
        return self.prices.get(model) or self.prices.get(canonical_model(model))

    def priced(
        self, usage: Usage, job_model: str = "", started_at: datetime | None = None
    ) -> Usage:
        """The usage with its cost from this table, at the rate of the window the call started
        in (``started_at``, naive UTC; unknown: off-peak), and what it would have cost at peak;
        unchanged for a model the table does not list."""
        price = self.price_of(usage.model_name) or self.price_of(job_model)
        if price is None:
            return usage
        tokens = (usage.prompt_tokens, usage.cached_prompt_tokens, usage.completion_tokens)
        at_peak = started_at is not None and self.peak_hours.is_peak(started_at)
        cost = (price.peak if at_peak else price.off_peak).cost_micros(*tokens)
        return replace(
            usage,
            cost_micros=cost,
            at_peak=at_peak,
            peak_cost_micros=price.peak.cost_micros(*tokens),
        )

"""The price table: what a model call costs, from its tokens. Pure.

Prices are micro-units of the table's currency per million tokens, as providers publish them:
prompt tokens that missed the provider's context cache, prompt tokens that hit it (DeepSeek
bills them at about a quarter), and completion tokens. The scheduler prices every reported call
with this table, so budgets and the usage API count one currency whatever the runtimes were
told; a model not in the table keeps the cost its runtime reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from scheduler_service.billing.usage import Usage

__all__ = ["DEFAULT_PRICES", "ModelPrice", "PriceTable"]


@dataclass(frozen=True, slots=True)
class ModelPrice:
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


#: DeepSeek's published prices (USD): deepseek-chat 0.27 / 0.07 cached / 1.10 per million
#: tokens, deepseek-reasoner 0.55 / 0.14 / 2.19.
DEFAULT_PRICES = "deepseek-chat=270000/70000/1100000,deepseek-reasoner=550000/140000/2190000"


@dataclass(frozen=True, slots=True)
class PriceTable:
    prices: Mapping[str, ModelPrice]

    @classmethod
    def parse(cls, text: str) -> PriceTable:
        """``model=prompt/cached/completion`` entries, comma-separated."""
        prices: dict[str, ModelPrice] = {}
        for entry in filter(None, (e.strip() for e in text.split(","))):
            model, sep, figures = entry.partition("=")
            parts = figures.split("/")
            if (
                not sep
                or not model.strip()
                or len(parts) != 3
                or not all(p.strip().isdigit() for p in parts)
            ):
                raise ValueError(
                    f"expected model=prompt/cached/completion (micro-units per million tokens), "
                    f"got {entry!r}"
                )
            prompt, cached, completion = (int(p) for p in parts)
            prices[model.strip()] = ModelPrice(prompt, cached, completion)
        return cls(prices)

    def priced(self, usage: Usage, job_model: str = "") -> Usage:
        """The usage with its cost from this table (the reported model's price, else the job's
        model's); unchanged for a model the table does not list."""
        price = self.prices.get(usage.model_name) or self.prices.get(job_model)
        if price is None:
            return usage
        cost = price.cost_micros(
            usage.prompt_tokens, usage.cached_prompt_tokens, usage.completion_tokens
        )
        return replace(usage, cost_micros=cost)

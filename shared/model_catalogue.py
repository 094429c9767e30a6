"""DeepSeek's models as it publishes them (api-docs.deepseek.com, *Models & Pricing* and *Rate
Limit & Isolation*): the two V4 models, the names that are aliases of one, and each model's
concurrency per account. Both services read it: the runtime's default model, the scheduler's
prices and model keys."""

from __future__ import annotations

__all__ = [
    "ACCOUNT_CONCURRENCY",
    "ALIASES",
    "DEEPSEEK",
    "DEFAULT_MODEL",
    "FLASH",
    "PRO",
    "canonical_model",
]

#: The provider name jobs and model keys carry for DeepSeek.
DEEPSEEK = "deepseek"
FLASH = "deepseek-v4-flash"
PRO = "deepseek-v4-pro"
DEFAULT_MODEL = FLASH
#: Names DeepSeek serves with another model: the 2025 names (``deepseek-chat`` is V4 Flash
#: without thinking, ``deepseek-reasoner`` with it) and V4.1's ``deepseek-flash``, which the
#: pricing page now lists in Flash's place (same price, same concurrency).
ALIASES: dict[str, str] = {
    "deepseek-chat": FLASH,
    "deepseek-reasoner": FLASH,
    "deepseek-flash": FLASH,
}
#: Calls at once per account and model, counted from request sent to response complete,
#: across every API key of the account; beyond it, HTTP 429. The scheduler's limit of a platform
#: key nobody limited (AIJOB_MODEL_ACCOUNT_CONCURRENCY).
ACCOUNT_CONCURRENCY: dict[str, int] = {FLASH: 2_500, PRO: 500}


def canonical_model(name: str) -> str:
    """The model DeepSeek serves ``name`` with (``name`` itself if it is no alias)."""
    return ALIASES.get(name, name)

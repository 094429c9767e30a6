"""An attempt's usage, call by call: tokens, latency, time to the first token and cost from the
runtime's price table, counted in the runtime's metrics as each call ends."""

from __future__ import annotations

from collections.abc import Mapping

from runtime_service import metrics
from runtime_service.answers import ModelAnswer, cached_tokens, reasoning_tokens
from runtime_service.leases import CallUsage, ModelConfig
from runtime_service.rate_limits import rate_limit_headers

__all__ = ["saw_limits", "with_call"]


def with_call(
    usage: CallUsage | None,
    completion: ModelAnswer,
    elapsed_s: float,
    model: str,
    config: ModelConfig,
) -> CallUsage:
    """``usage`` (None before the attempt's first call) with one more call added."""
    metrics.MODEL_LATENCY.observe(elapsed_s)
    if completion.first_token_s is not None:
        metrics.FIRST_TOKEN.observe(completion.first_token_s)
    if completion.usage is not None:
        metrics.TOKENS.labels("prompt").inc(completion.usage.prompt_tokens)
        metrics.TOKENS.labels("completion").inc(completion.usage.completion_tokens)
    usage = usage or CallUsage(model_name=completion.model or model)
    if completion.first_token_s is not None:
        usage.time_to_first_token_ms = round(completion.first_token_s * 1000)
    if completion.usage is not None:
        usage.prompt_tokens += completion.usage.prompt_tokens
        usage.completion_tokens += completion.usage.completion_tokens
        usage.cached_prompt_tokens += cached_tokens(completion.usage)
        usage.reasoning_tokens += reasoning_tokens(completion.usage)
    usage.latency_ms += round(elapsed_s * 1000)
    cost = (
        usage.prompt_tokens * config.price_prompt_per_mtok_micros
        + usage.completion_tokens * config.price_completion_per_mtok_micros
    ) // 1_000_000
    metrics.COST.inc(max(0, cost - usage.cost_micros))
    usage.cost_micros = cost
    return usage


def saw_limits(usage: CallUsage | None, headers: Mapping[str, str]) -> None:
    """The provider's rate-limit headers of the latest answer travel with the usage."""
    seen = rate_limit_headers(headers)
    if seen is not None and usage is not None:
        usage.rate_limits = seen

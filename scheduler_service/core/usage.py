"""What model calls used and cost: one call's usage as a runtime reports it, and totals."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduler_service.core.records import JobRecord

__all__ = ["MAX_CALL_MILLIS", "MAX_CALL_TOKENS", "Usage", "UsageEntry", "UsageLine"]

#: The most tokens one call's prompt, or its completion, is recorded with. The counts come from
#: the provider's answer, which may say anything; the ledger holds a call's prompt and completion
#: together in a 32-bit column, and no model call comes near this.
MAX_CALL_TOKENS = 1_000_000_000
#: The most milliseconds a call's latency or time to first token is recorded with (32 bits).
MAX_CALL_MILLIS = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Usage:
    """One model call's usage, as a runtime reports it."""

    model_name: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int
    cost_micros: int
    #: How long the provider said its key has nothing left (its x-ratelimit-* headers: none
    #: remaining, and the window's reset); None when it has some, or said nothing.
    exhausted_for_ms: int | None = None
    #: Time to the answer's first token (a streamed call), None when not measured.
    first_token_ms: int | None = None
    #: Prompt tokens the provider served from its context cache (billed lower).
    cached_prompt_tokens: int = 0
    #: Of the completion tokens, those the model spent reasoning (billed as output).
    reasoning_tokens: int = 0
    #: Set by the scheduler's price table: whether the call started in a peak window, and what
    #: its tokens cost at the peak rate (``peak_cost_micros - cost_micros`` is what waiting for
    #: the off-peak hours saved).
    at_peak: bool = False
    peak_cost_micros: int | None = None

    def bounded(self) -> tuple[Usage, bool]:
        """This usage with every count within what the ledger records, and whether any had to
        be cut to get there."""
        bounded = replace(
            self,
            prompt_tokens=min(self.prompt_tokens, MAX_CALL_TOKENS),
            completion_tokens=min(self.completion_tokens, MAX_CALL_TOKENS),
            cached_prompt_tokens=min(self.cached_prompt_tokens, MAX_CALL_TOKENS),
            reasoning_tokens=min(self.reasoning_tokens, MAX_CALL_TOKENS),
            latency_ms=min(self.latency_ms, MAX_CALL_MILLIS),
            first_token_ms=None
            if self.first_token_ms is None
            else min(self.first_token_ms, MAX_CALL_MILLIS),
        )
        return bounded, bounded != self


@dataclass(frozen=True, slots=True)
class UsageLine:
    """Usage totals, for a user or one of their model keys."""

    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_micros: int = 0
    jobs: int = 0
    attempts: int = 0
    peak_cost_micros: int = 0
    off_peak_cost_micros: int = 0
    saved_cost_micros: int = 0
    reasoning_tokens: int = 0

    @property
    def cache_hit_share(self) -> float:
        """The share of prompt tokens served from the provider's cache (0 with none)."""
        return self.cached_prompt_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


#: One reported model call: the job, its attempt, the usage, and the attempt's error code.
UsageEntry = tuple["JobRecord", int, Usage | None, str | None]

"""What model calls used and cost: one call's usage as a runtime reports it, and totals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduler_service.lifecycle.records import JobRecord

__all__ = ["Usage", "UsageEntry", "UsageLine"]


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
    #: Set by the scheduler's price table: whether the call started in a peak window, and what
    #: its tokens cost at the peak rate (``peak_cost_micros - cost_micros`` is what waiting for
    #: the off-peak hours saved).
    at_peak: bool = False
    peak_cost_micros: int | None = None


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


#: One reported model call: the job, its attempt, the usage, and the attempt's error code.
UsageEntry = tuple["JobRecord", int, Usage | None, str | None]

"""How much a model thinks before it answers (DeepSeek's thinking mode: on by default at the
provider, effort ``high``, switched per request). Both services read it: the scheduler keeps a
job's effort and leases it, the runtime turns it into the request's parameters."""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["EFFORTS", "OFF", "REASONING_ALLOWANCE", "Effort", "output_cap", "thinking_options"]

Effort = Literal["off", "low", "high", "max"]
#: Every effort, from none to the most.
EFFORTS: tuple[Effort, ...] = ("off", "low", "high", "max")
OFF: Effort = "off"
#: Tokens a call may reason before its answer, per effort, on top of the answer's own cap:
#: reasoning counts against ``max_tokens``, and a cap sized for the answer alone would end a
#: thinking call before its answer starts.
REASONING_ALLOWANCE: dict[str, int] = {"off": 0, "low": 4_000, "high": 16_000, "max": 32_000}


def output_cap(answer_cap: int, effort: str) -> int:
    """The ``max_tokens`` of a call whose answer may take ``answer_cap`` tokens (0: none sent)
    and that thinks at ``effort``."""
    return answer_cap + REASONING_ALLOWANCE.get(effort, 0) if answer_cap > 0 else 0


def thinking_options(effort: str) -> dict[str, Any]:
    """The request body's fields that say how the model thinks (DeepSeek's ``thinking`` toggle,
    and its ``reasoning_effort`` when on); sent on every call, since the provider's default is
    to think. An unknown effort is off."""
    if effort not in EFFORTS or effort == OFF:
        return {"thinking": {"type": "disabled"}}
    return {"thinking": {"type": "enabled"}, "reasoning_effort": effort}

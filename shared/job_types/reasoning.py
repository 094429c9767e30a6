"""How much a model thinks before it answers (DeepSeek's thinking mode: on by default at the
provider, effort ``high``, switched per request). Both services read it: the scheduler keeps a
job's effort and leases it, the runtime turns it into the request's parameters."""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["EFFORTS", "OFF", "Effort", "thinking_options"]

Effort = Literal["off", "low", "high", "max"]
#: Every effort, from none to the most.
EFFORTS: tuple[Effort, ...] = ("off", "low", "high", "max")
OFF: Effort = "off"


def thinking_options(effort: str) -> dict[str, Any]:
    """The request body's fields that say how the model thinks (DeepSeek's ``thinking`` toggle,
    and its ``reasoning_effort`` when on); sent on every call, since the provider's default is
    to think. An unknown effort is off."""
    if effort not in EFFORTS or effort == OFF:
        return {"thinking": {"type": "disabled"}}
    return {"thinking": {"type": "enabled"}, "reasoning_effort": effort}

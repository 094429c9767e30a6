"""synthetic_echo: echoes its input; tests and benchmarks."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from shared.job_types.base import Input, Output, Params
from shared.job_types.spec import JobTypeSpec

__all__ = ["SPEC", "EchoInput", "EchoOutput", "EchoParams"]


class EchoInput(Input):
    """synthetic_echo takes anything."""

    model_config = ConfigDict(extra="allow")


class EchoOutput(Output):
    """synthetic_echo returns what it was given under ``echo``."""

    echo: Any = None


class EchoParams(Params):
    model_config = ConfigDict(extra="allow")


def sample_output(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    """A schema-valid output built from the inputs: what the scripted model answers."""
    return {"echo": snapshot}


SPEC = JobTypeSpec(
    "synthetic_echo",
    sample=sample_output,
    label="Synthetic echo",
    description="Echoes its input; tests and benchmarks.",
    domain="maintenance",
    queue="ai-interactive",
    timeout_ms=30_000,
    projector="echo",
    snapshot=EchoInput,
    params=EchoParams,
    output=EchoOutput,
    instructions='Return {"echo": <the snapshot>} exactly.',
    max_retries=2,
    backoff_base_ms=1_000,
    default_priority=50,
    content_safety_check=False,
)

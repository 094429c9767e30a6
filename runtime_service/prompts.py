"""The prompt of a leased job: its job type's instructions (shared/job_types/) rendered with the
snapshot, params and output schema. The prompt key and version travel with each lease (and are
recorded on the job), so a template change is a new version, never an edit in place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from shared.job_types import spec_of
from shared.job_types.spec import PROMPT_LAYOUTS, Messages

__all__ = ["Prompt", "UnknownPromptError", "build_prompt", "repair_messages"]


class UnknownPromptError(LookupError):
    pass


@dataclass(frozen=True, slots=True)
class Prompt:
    key: str
    version: str
    messages: Messages


def build_prompt(
    key: str,
    version: str,
    snapshot: dict[str, Any],
    params: dict[str, Any],
    schema: type[BaseModel],
) -> Prompt:
    spec = spec_of(key)
    layout = PROMPT_LAYOUTS.get(version or "v1")
    if spec is None or layout is None:
        raise UnknownPromptError(f"no prompt template {key!r} version {version!r}")
    return Prompt(key, version or "v1", layout(spec, snapshot, params, schema))


def repair_messages(prompt: Prompt, bad_answer: str, problems: str) -> Messages:
    """The conversation again, with the model shown why its answer was refused."""
    return [
        *prompt.messages,
        {"role": "assistant", "content": bad_answer},
        {
            "role": "user",
            "content": "That answer did not validate against the schema:\n"
            f"{problems}\nReply with the corrected JSON object only.",
        },
    ]

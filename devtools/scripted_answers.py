"""The scripted model's answers: each job type's sample output (its ``JobTypeSpec.sample``),
built from the snapshot and params in the prompt (``answer_for``), and the builders tests
register for a type of their own (Adding a job type, in docs/architecture.md)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from shared.job_types import spec_of

__all__ = ["Builder", "answer_for", "forget_answer", "register_answer"]

_JOB_TYPE = re.compile(r"^job_type: ([\w-]+)$", re.MULTILINE)
_FENCED = re.compile(r"```json\n(.*?)\n```", re.DOTALL)


Builder = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


#: Answers for types the catalogue does not hold (a test's own, registered for the test).
_BUILDERS: dict[str, Builder] = {}


def register_answer(job_type: str, builder: Builder) -> None:
    """Teach the server the answer of a job type it does not know (Adding a job type, in
    docs/architecture.md): ``builder(snapshot, params)`` returns a schema-valid output."""
    _BUILDERS[job_type] = builder


def forget_answer(job_type: str) -> None:
    _BUILDERS.pop(job_type, None)


def answer_for(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The schema-valid answer for the job the prompt describes."""
    # Either layout (shared/job_types/spec.py): the snapshot's block before the params'.
    text = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") != "assistant")
    match = _JOB_TYPE.search(text)
    blocks = _FENCED.findall(text)
    snapshot = json.loads(blocks[0]) if blocks else {}
    params = json.loads(blocks[1]) if len(blocks) > 1 else {}
    job_type = match.group(1) if match else "synthetic_echo"
    builder = _BUILDERS.get(job_type) or _sample_of(job_type) or _sample_of("synthetic_echo")
    assert builder is not None
    return builder(snapshot, params)


def _sample_of(job_type: str) -> Builder | None:
    spec = spec_of(job_type)
    return spec.sample if spec is not None else None

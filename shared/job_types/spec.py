"""A job type in one place: its definition, its snapshot, params and output schemas, and its
prompt. The scheduler builds its ``JobDefinition`` from it (queue policy, limits, the projector
it names), the runtime its prompt and the schema it checks an answer against."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

__all__ = ["JobTypeSpec", "Join", "Messages", "Sample", "Split", "render_v1"]

Messages = list[dict[str, str]]
#: A schema-valid output built from a job's snapshot and params.
Sample = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]
#: A job's children's params, from its snapshot, its params and the most items one call should
#: write; an empty list: the job runs as one call.
Split = Callable[[dict[str, Any], dict[str, Any], int], list[dict[str, Any]]]
#: The parent's output from its children's outputs, in the children's order (pure data).
Join = Callable[[list[dict[str, Any]]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class JobTypeSpec:
    job_type: str
    label: str
    description: str
    domain: Literal["analysis", "generation", "import", "maintenance"]
    queue: Literal["ai-interactive", "ai-background", "ai-analysis"]
    timeout_ms: int
    #: The scheduler's projector of its outputs (scheduler_service/projection/).
    projector: str
    snapshot: type[BaseModel]
    params: type[BaseModel]
    output: type[BaseModel]
    #: What the model is asked to do; the prompt adds the snapshot, params and output schema.
    instructions: str
    #: The version of the schemas and of the prompt: a change is a new version, never an edit.
    version: str = "v1"
    #: None takes the queue's default (interactive: 1 retry from 2 s; background: 2 from 5 s;
    #: analysis: 2 from 1 s).
    max_retries: int | None = None
    backoff_base_ms: int | None = None
    default_priority: int | None = None
    content_safety_check: bool = True
    #: ``off_peak``: waits for the provider's cheap hours unless its deadline cannot wait
    #: (the background analyses); ``immediate``: runs as soon as there is room.
    cost_policy: Literal["immediate", "off_peak"] = "immediate"
    #: Whether the runtime streams the answer to the scheduler as it is written (StreamOutput),
    #: and a later attempt continues the text of one that ended without a result instead of
    #: starting over (the interactive generations: a learner waits for them).
    streams_output: bool = False
    #: A schema-valid output built from the inputs: what the scripted model answers for this
    #: type (``make run``, the tests), and an example of the output for callers.
    sample: Sample | None = None
    #: How a job of this type splits into children of the same type (created with it), and how
    #: their outputs join into its own, in the scheduler (docs/architecture.md, *Job trees*).
    split: Split | None = None
    join: Join | None = None
    #: A parent's default bound on its children running at once (0: none).
    max_parallel: int = 0
    #: ``all_done``: the share of children that must succeed for the parent to succeed.
    join_min_share: float = 0.5


def render_v1(
    spec: JobTypeSpec, snapshot: dict[str, Any], params: dict[str, Any], schema: type[BaseModel]
) -> Messages:
    """The v1 prompt: the instructions and the output's JSON schema, then the inputs."""
    system = (
        "You are an assistant for a learning app. "
        f"{spec.instructions}\n"
        "Reply with one JSON object only, no prose, matching this JSON schema:\n"
        f"{json.dumps(schema.model_json_schema(), separators=(',', ':'))}\n"
        f"job_type: {spec.job_type}"
    )
    user = (
        "Snapshot:\n```json\n"
        f"{json.dumps(snapshot, ensure_ascii=False)}\n```\n"
        "Parameters:\n```json\n"
        f"{json.dumps(params, ensure_ascii=False)}\n```"
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]

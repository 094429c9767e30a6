"""A job type in one place: its definition, its snapshot, params and output schemas, and its
prompt. The scheduler builds its ``JobDefinition`` from it (queue policy, limits, the projector
it names), the runtime its prompt and the schema it checks an answer against."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from shared.job_types.reasoning import EFFORTS, OFF, Effort

__all__ = [
    "PROMPT_LAYOUTS",
    "JobTypeSpec",
    "Join",
    "Messages",
    "Sample",
    "Split",
    "render_v1",
    "render_v2",
]

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
    #: The version of the schemas: a change is a new version, never an edit.
    version: str = "v1"
    #: The prompt's layout (PROMPT_LAYOUTS): new jobs take this one, a job keeps the layout it
    #: was created with.
    prompt_version: str = "v2"
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
    #: How much the model thinks before answering: off for the structured analyses and
    #: generators (the schema says what to write; thinking would multiply the output tokens
    #: and delay the first one), and the efforts a create may ask for instead.
    reasoning: Effort = OFF
    reasoning_allowed: tuple[Effort, ...] = EFFORTS


def _canonical(value: Any) -> str:
    """JSON with sorted keys and no spaces: the same value renders to the same bytes, whatever
    order its keys arrived in (a provider's cache matches bytes)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


#: The start of every v2 prompt: what all of a learner's job types share, ahead of the snapshot.
V2_PREAMBLE = (
    "You are an assistant for a learning app. The learner's data comes first; the task and "
    "the JSON schema of the answer come after it.\nSnapshot:\n```json\n"
)


def render_v2(
    spec: JobTypeSpec, snapshot: dict[str, Any], params: dict[str, Any], schema: type[BaseModel]
) -> Messages:
    """The v2 prompt, laid out for the provider's context cache: the snapshot first (canonical
    JSON), so that every job over the same snapshot, of any type, shares that prefix byte for
    byte; then the type's instructions, its output schema and the params."""
    system = f"{V2_PREAMBLE}{_canonical(snapshot)}\n```"
    user = (
        f"{spec.instructions}\n"
        "Reply with one JSON object only, no prose, matching this JSON schema:\n"
        f"{_canonical(schema.model_json_schema())}\n"
        f"job_type: {spec.job_type}\n"
        "Parameters:\n```json\n"
        f"{_canonical(params)}\n```"
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


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


#: Each prompt version's layout: a job is rendered with the one it was created with.
PROMPT_LAYOUTS: dict[
    str, Callable[[JobTypeSpec, dict[str, Any], dict[str, Any], type[BaseModel]], Messages]
] = {
    "v1": render_v1,
    "v2": render_v2,
}

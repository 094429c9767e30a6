"""Versioned prompt templates per job type. The prompt key and version travel with each lease
(and are recorded on the job), so a template change is a new version, never an edit in place."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

__all__ = ["Prompt", "UnknownPromptError", "build_prompt", "repair_messages"]

Messages = list[dict[str, str]]


class UnknownPromptError(LookupError):
    pass


@dataclass(frozen=True, slots=True)
class Prompt:
    key: str
    version: str
    messages: Messages


_INSTRUCTIONS: dict[str, str] = {
    "learning_state_analysis": "Summarise the learner's current state of learning: a short "
    "summary, a mastery level, their strengths and weaknesses.",
    "weak_point_analysis": "Find the knowledge points the learner struggles with, with the "
    "evidence from their answers, a severity and a confidence from 0 to 100.",
    "next_action_planning": "Recommend the learner's next steps, most useful first.",
    "quiz_generation": "Write quiz questions about the material, as many as params.count asks for, "
    "at the requested difficulty. Give choices for choice questions and the correct answer.",
    "flashcard_generation": "Write flashcards (front, back, optional hint) about the material, as "
    "many as params.count asks for.",
    "synthetic_echo": 'Return {"echo": <the snapshot>} exactly.',
}


def _v1(job_type: str) -> Callable[[dict[str, Any], dict[str, Any], type[BaseModel]], Messages]:
    def render(
        snapshot: dict[str, Any], params: dict[str, Any], schema: type[BaseModel]
    ) -> Messages:
        system = (
            "You are an assistant for a learning app. "
            f"{_INSTRUCTIONS[job_type]}\n"
            "Reply with one JSON object only, no prose, matching this JSON schema:\n"
            f"{json.dumps(schema.model_json_schema(), separators=(',', ':'))}\n"
            f"job_type: {job_type}"
        )
        user = (
            "Snapshot:\n```json\n"
            f"{json.dumps(snapshot, ensure_ascii=False)}\n```\n"
            "Parameters:\n```json\n"
            f"{json.dumps(params, ensure_ascii=False)}\n```"
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    return render


TEMPLATES = {(job_type, "v1"): _v1(job_type) for job_type in _INSTRUCTIONS}


def build_prompt(
    key: str,
    version: str,
    snapshot: dict[str, Any],
    params: dict[str, Any],
    schema: type[BaseModel],
) -> Prompt:
    try:
        render = TEMPLATES[(key, version or "v1")]
    except KeyError:
        raise UnknownPromptError(f"no prompt template {key!r} version {version!r}") from None
    return Prompt(key, version or "v1", render(snapshot, params, schema))


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

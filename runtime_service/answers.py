"""A model's answer: gathered as it streams, checked against the job's output schema (with the
Markdown fence some models add taken off), and the job's prompt and schema looked up."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from runtime_service.failures import JobFailure
from runtime_service.leases import LeaseInput
from runtime_service.prompts import Prompt, UnknownPromptError, build_prompt
from shared.error_codes import ErrorCode
from shared.job_schemas import OUTPUT_SCHEMAS

__all__ = [
    "REPAIRABLE",
    "STREAM_PROGRESS",
    "ModelAnswer",
    "cached_tokens",
    "finished",
    "output_schema",
    "prompt_of",
    "reasoning_tokens",
    "unfenced",
    "unstalled",
    "validated",
]

#: Progress while an answer streams: the call started (10) to the answer complete (60).
STREAM_PROGRESS = (10, 60)


@dataclass
class ModelAnswer:
    """A streamed answer as it arrives: its text, finish reason, usage, and when the first
    token came (seconds after the call started)."""

    model: str
    parts: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Any = None
    #: When the first token came, reasoning or answer: a model that thinks first is working,
    #: not congested (liveness, stall detection and the time-to-first-token signal read it).
    first_token_s: float | None = None
    chars: int = 0
    #: Characters of reasoning seen (never part of the answer: not hashed, streamed or stored).
    reasoning_chars: int = 0

    def resume_from(self, prefix: str) -> None:
        """The answer continues ``prefix`` (an earlier attempt's text): it starts with it."""
        self.parts.append(prefix)
        self.chars += len(prefix)

    def take(self, chunk: Any, elapsed_s: float) -> str:
        """Add the chunk; returns the text it carried."""
        if getattr(chunk, "model", None):
            self.model = chunk.model
        if chunk.usage is not None:
            self.usage = chunk.usage
        added = ""
        for choice in chunk.choices or ():
            delta = choice.delta
            # DeepSeek's thinking mode streams ``reasoning_content`` before any content.
            thought = getattr(delta, "reasoning_content", None) if delta is not None else None
            if thought:
                if self.first_token_s is None:
                    self.first_token_s = elapsed_s
                self.reasoning_chars += len(thought)
            text = delta.content if delta is not None else None
            if text:
                if self.first_token_s is None:
                    self.first_token_s = elapsed_s
                self.parts.append(text)
                self.chars += len(text)
                added += text
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        return added

    def progress(self, cap_tokens: int) -> int:
        """Where the answer is, from the call's start (10) to its end (60): the tokens received
        (about four characters each) against the output cap."""
        done = min(1.0, self.chars / 4 / max(1, cap_tokens))
        low, high = STREAM_PROGRESS
        return low + int((high - low) * done)

    @property
    def content(self) -> str:
        return "".join(self.parts)


async def unstalled(chunks: Any, answer: ModelAnswer, stall_s: float) -> AsyncIterator[Any]:
    """The stream's chunks; once tokens flow (reasoning or answer), a gap longer than
    ``stall_s`` is a stalled answer (before the first token, a provider may hold the call: the
    job's timeout bounds that wait)."""
    iterator = chunks.__aiter__()
    while True:
        try:
            if answer.first_token_s is None:
                chunk = await iterator.__anext__()
            else:
                async with asyncio.timeout(stall_s):
                    chunk = await iterator.__anext__()
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise JobFailure(
                ErrorCode.MODEL_TIMEOUT,
                "The model stopped answering.",
                f"no token for {stall_s:g} s after the first",
            ) from None
        yield chunk


def finished(answer: ModelAnswer) -> str:
    """The answer's text, once it ended well: not cut off at the token cap, not blank."""
    if answer.finish_reason == "length":
        raise JobFailure(
            ErrorCode.MODEL_OUTPUT_TRUNCATED,
            "The model's answer was cut off.",
            "finish_reason=length",
        )
    if not answer.content.strip():
        # JSON Output's answer when the model could not write JSON: a new call may.
        raise JobFailure(
            ErrorCode.MODEL_BLANK_ANSWER,
            "The model gave a blank answer.",
            f"whitespace only, finish_reason={answer.finish_reason}",
        )
    return answer.content


def reasoning_tokens(usage: Any) -> int:
    """Completion tokens the model spent reasoning (``completion_tokens_details``)."""
    details = getattr(usage, "completion_tokens_details", None)
    spent = getattr(details, "reasoning_tokens", None) if details is not None else None
    return int(spent) if isinstance(spent, int) and spent > 0 else 0


def cached_tokens(usage: Any) -> int:
    """Prompt tokens served from the provider's context cache, in either dialect: DeepSeek's
    ``prompt_cache_hit_tokens`` or OpenAI's ``prompt_tokens_details.cached_tokens``."""
    hit = getattr(usage, "prompt_cache_hit_tokens", None)
    if hit is None:
        details = getattr(usage, "prompt_tokens_details", None)
        hit = getattr(details, "cached_tokens", None) if details is not None else None
    return int(hit) if isinstance(hit, int) and hit > 0 else 0


def output_schema(lease: LeaseInput) -> type[BaseModel]:
    try:
        return OUTPUT_SCHEMAS[(lease.job_type, lease.output_schema_version or "v1")]
    except KeyError:
        raise JobFailure(
            ErrorCode.INVALID_SCHEMA,
            "This runtime does not know the job's output schema.",
            lease.job_type,
        ) from None


def prompt_of(lease: LeaseInput, schema: type[BaseModel]) -> Prompt:
    try:
        return build_prompt(
            lease.prompt_key, lease.prompt_version, lease.snapshot, lease.params, schema
        )
    except UnknownPromptError as error:
        raise JobFailure(
            ErrorCode.INVALID_SCHEMA, "This runtime has no prompt for the job.", str(error)
        ) from None


REPAIRABLE = frozenset({ErrorCode.VALIDATION_FAILED, ErrorCode.VALIDATION_UNPARSEABLE})
#: A whole answer wrapped in a Markdown code fence (```json ... ``` or ``` ... ```).
_FENCE = re.compile(r"\A\s*```[\w-]*[ \t]*\n(.*?)\n?```\s*\Z", re.DOTALL)


def unfenced(answer: str) -> str:
    """The answer without the Markdown code fence some models put around JSON."""
    match = _FENCE.match(answer)
    return match.group(1) if match else answer


def validated(schema: type[BaseModel], answer: str) -> BaseModel:
    try:
        value = json.loads(unfenced(answer))
    except ValueError:
        raise JobFailure(
            ErrorCode.VALIDATION_UNPARSEABLE,
            "The model's answer was not JSON.",
            "answer is not JSON",
        ) from None
    try:
        return schema.model_validate(value)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in error.errors()[:10]
        )
        raise JobFailure(
            ErrorCode.VALIDATION_FAILED, "The model's answer did not match the schema.", problems
        ) from None

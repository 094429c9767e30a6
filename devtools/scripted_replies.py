"""The scripted model's replies: usage counts (cache hits and misses, reasoning tokens), the
content a fault asks for, the reasoning a thinking call writes first, and the pieces a streamed
answer is sent in."""

from __future__ import annotations

import json
import math
import time
import uuid
from typing import Any

from devtools.scripted_answers import answer_for
from devtools.scripted_cache import hit_tokens

#: Reasoning tokens a thinking call writes before its answer, per answer token and effort
#: (DeepSeek's default effort is ``high``: output tokens several times over); at least a cache
#: block's worth of answer tokens is reasoned about.
REASONING_PER_ANSWER_TOKEN = {"low": 1, "high": 3, "max": 6}
_THOUGHT = "Let me work through the learner's data step by step. "


def thinking_of(request: dict[str, Any]) -> str:
    """The effort a request thinks with, as DeepSeek reads it: on (``high``) unless its
    ``thinking`` says ``disabled``; ``""`` when off."""
    thinking = request.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "disabled":
        return ""
    effort = request.get("reasoning_effort")
    return effort if effort in REASONING_PER_ANSWER_TOKEN else "high"


def reasoning_for(effort: str, answer: str) -> str:
    """The reasoning text a call at ``effort`` writes before ``answer`` (four characters a
    token)."""
    tokens = REASONING_PER_ANSWER_TOKEN.get(effort, 0) * max(64, len(answer) // 4)
    chars = 4 * tokens
    return (_THOUGHT * (chars // len(_THOUGHT) + 1))[:chars]


def usage_of(prompt: str, content: str, *, hit_chars: int, reasoning: str = "") -> dict[str, Any]:
    """Token counts (a quarter of the characters): the prompt's cache hits in whole blocks,
    reported both as DeepSeek does (``prompt_cache_hit_tokens``, ``prompt_cache_miss_tokens``)
    and as OpenAI does (``prompt_tokens_details``); reasoning tokens are completion tokens
    (``completion_tokens_details.reasoning_tokens``)."""
    prompt_tokens = max(1, len(prompt) // 4)
    thought = len(reasoning) // 4
    completion_tokens = max(1, len(content) // 4) + thought
    hit = hit_tokens(hit_chars, prompt_tokens)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_cache_hit_tokens": hit,
        "prompt_cache_miss_tokens": prompt_tokens - hit,
        "prompt_tokens_details": {"cached_tokens": hit},
        "completion_tokens_details": {"reasoning_tokens": thought},
    }


def prefix_of(messages: list[dict[str, Any]]) -> str | None:
    """The text of a last assistant message with ``prefix: true`` (chat prefix completion)."""
    last = messages[-1] if messages else {}
    if last.get("role") == "assistant" and last.get("prefix") is True:
        return str(last.get("content") or "")
    return None


def content_for(
    fault: str, messages: list[dict[str, Any]], cap: Any, reasoning: str = ""
) -> tuple[str, str]:
    """The answer's text and finish reason, as the fault shapes it; cut at ``max_tokens``, which
    the reasoning written first counts against. With a prefix (chat prefix completion), the rest
    of the scripted answer after it."""
    content = json.dumps(answer_for(messages), ensure_ascii=False)
    prefix = prefix_of(messages)
    if prefix is not None:
        content = content[len(prefix) :] if content.startswith(prefix) else content
    finish = "stop"
    if fault == "malformed":
        content = "{this is not json"
    elif fault == "schema":
        content = json.dumps({"unexpected": "shape"})
    elif fault == "length":
        content, finish = content[: len(content) // 2], "length"
    elif fault == "fenced":
        content = f"```json\n{content}\n```"
    elif fault == "blank":
        content = "  \n\n  "  # JSON Output's answer when the model could not write JSON
    room = cap - len(reasoning) // 4 if isinstance(cap, int) and cap > 0 else None
    if room is not None and len(content) // 4 > room:
        content, finish = content[: max(0, room) * 4], "length"  # cut at the cap, as providers do
    return content, finish


def pauses_for(fault: str, argument: str, count: int, thoughts: int = 0) -> list[float]:
    """Seconds before each event: ``drip`` spreads its time over the content pieces (events 1
    to count - 2: the role comes first, the finish and usage last), ``stall`` waits once after
    the first piece, ``think`` once between the last of ``thoughts`` reasoning pieces and the
    first content piece."""
    pauses = [0.0] * count
    seconds = int(argument or "1000") / 1000
    if fault == "think" and count > thoughts + 1:
        pauses[thoughts + 1] = seconds
    elif fault == "drip":
        pieces = range(1, max(2, count - 2))
        for index in pieces:
            pauses[index] = seconds / len(pieces)
    elif fault == "stall" and count > 2:
        pauses[2] = seconds
    return pauses


def stream_chunks(
    model: str,
    content: str,
    finish: str,
    usage: dict[str, Any] | None,
    pieces: int = 1,
    *,
    reasoning: str = "",
) -> list[dict[str, Any]]:
    """The answer as chat.completion.chunk events: the role, the reasoning in pieces (a thinking
    call's ``reasoning_content``), the content in pieces, the finish, and the usage when asked
    for."""
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            **base,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    size = max(1, math.ceil(len(content) / pieces))
    parts = [content[i : i + size] for i in range(0, len(content), size)] or [""]
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"reasoning_content": part}) for part in reasoning_pieces(reasoning)]
    events += [chunk({"content": part}) for part in parts]
    events.append(chunk({}, finish))
    if usage is not None:
        events.append({**base, "choices": [], "usage": usage})
    return events


def reasoning_pieces(reasoning: str) -> list[str]:
    """The reasoning as streamed: 256 characters a piece."""
    return [reasoning[i : i + 256] for i in range(0, len(reasoning), 256)]


def completion_body(
    model: str, content: str, finish: str, usage: dict[str, Any], reasoning: str = ""
) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": content,
                    **({"reasoning_content": reasoning} if reasoning else {}),
                },
                "finish_reason": finish,
            }
        ],
        "usage": usage,
    }

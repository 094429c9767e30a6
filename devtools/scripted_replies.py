"""The scripted model's replies: usage counts (with cached prompt tokens), the content a fault
asks for, and the pieces a streamed answer is sent in."""

from __future__ import annotations

import json
import math
import time
import uuid
from typing import Any

from devtools.scripted_answers import answer_for

CACHE_BLOCK = 64


def usage_of(prompt: str, content: str, *, cached: bool) -> dict[str, Any]:
    """Token counts (a quarter of the characters). A prompt seen before hits the context cache
    for its whole blocks, reported both as DeepSeek does (``prompt_cache_hit_tokens``,
    ``prompt_cache_miss_tokens``) and as OpenAI does (``prompt_tokens_details``)."""
    prompt_tokens, completion_tokens = max(1, len(prompt) // 4), max(1, len(content) // 4)
    hit = prompt_tokens // CACHE_BLOCK * CACHE_BLOCK if cached else 0
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_cache_hit_tokens": hit,
        "prompt_cache_miss_tokens": prompt_tokens - hit,
        "prompt_tokens_details": {"cached_tokens": hit},
    }


def prefix_of(messages: list[dict[str, Any]]) -> str | None:
    """The text of a last assistant message with ``prefix: true`` (chat prefix completion)."""
    last = messages[-1] if messages else {}
    if last.get("role") == "assistant" and last.get("prefix") is True:
        return str(last.get("content") or "")
    return None


def content_for(fault: str, messages: list[dict[str, Any]], cap: Any) -> tuple[str, str]:
    """The answer's text and finish reason, as the fault shapes it; cut at ``max_tokens``. With
    a prefix (chat prefix completion), the rest of the scripted answer after it."""
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
    if isinstance(cap, int) and cap > 0 and len(content) // 4 > cap:
        content, finish = content[: cap * 4], "length"  # cut at the cap, as providers do
    return content, finish


def pauses_for(fault: str, argument: str, count: int) -> list[float]:
    """Seconds before each event: ``drip`` spreads its time over the content pieces (events 1
    to count - 2: the role comes first, the finish and usage last), ``stall`` waits once after
    the first piece."""
    pauses = [0.0] * count
    seconds = int(argument or "1000") / 1000
    if fault == "drip":
        pieces = range(1, max(2, count - 2))
        for index in pieces:
            pauses[index] = seconds / len(pieces)
    elif fault == "stall" and count > 2:
        pauses[2] = seconds
    return pauses


def stream_chunks(
    model: str, content: str, finish: str, usage: dict[str, Any] | None, pieces: int = 1
) -> list[dict[str, Any]]:
    """The answer as chat.completion.chunk events: the role, the content in pieces, the finish,
    and the usage when asked for."""
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
    events += [chunk({"content": part}) for part in parts]
    events.append(chunk({}, finish))
    if usage is not None:
        events.append({**base, "choices": [], "usage": usage})
    return events


def completion_body(model: str, content: str, finish: str, usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ],
        "usage": usage,
    }

"""A scripted model server that speaks enough of the OpenAI API for ``openai.AsyncOpenAI``.

    python -m runtime_service.scripted_model --port 8400 [--fault NAME]

``POST /v1/chat/completions`` answers schema-valid JSON for each job type, built from the snapshot
in the prompt, with usage counts; ``GET /v1/models`` lists one model. Faults, to exercise the
client's error paths for real:

    latency:MS   answer after MS milliseconds        429[:S]   rate limited, Retry-After S (1)
    500, 503     server error / overloaded           hang      never answer (past any timeout)
    401, 403     the key is refused                  context   400: context length exceeded
    malformed    content that is not JSON            schema    JSON that breaks the job's schema
    length       cut off, finish_reason "length"     fenced    the JSON inside a ```json fence
    404          model not found                     402       insufficient balance
    400          400 "Unsupported parameter ... in this context" (not a context-length error)
    422          invalid parameters

A fault applies to every request (``--fault``), to the next requests in order (``POST
/control/faults`` with ``{"faults": [...]}``), or to one request whose prompt contains
``scripted-fault=NAME``.

Limits, per API key, as OpenAI-compatible providers enforce them (``--rpm``, ``--tpm``,
``--concurrency``): past one, 429 with ``Retry-After``; every answer carries the
``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` headers of the limits set. A request's
tokens are its prompt's (a quarter of its characters) plus its ``max_tokens`` (256 when unset).

``GET /control/stats``: ``requests``, ``rate_limited``, ``max_concurrent`` (calls in progress at
once, at most), ``in_progress``, per-fault counts, and ``keys``: the same per key, each key shown
as a fingerprint (:func:`key_label`).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from runtime_service.scripted_limits import KeyLimits, ProviderLimits

__all__ = ["ScriptedModelServer", "answer_for", "key_label"]

MODEL = "scripted-deepseek"
_JOB_TYPE = re.compile(r"^job_type: (\w+)$", re.MULTILINE)
_FENCED = re.compile(r"```json\n(.*?)\n```", re.DOTALL)
_MARKER = re.compile(r"scripted-fault=([\w:]+)")


# -- answers ----------------------------------------------------------------------------------


def _learning(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    answers = snapshot.get("answers") or []
    right = sum(1 for a in answers if a.get("correct"))
    ratio = right / len(answers) if answers else 0.5
    points = snapshot.get("knowledgePoints") or []
    level = (
        "novice"
        if ratio < 0.25
        else "developing"
        if ratio < 0.6
        else "proficient"
        if ratio < 0.9
        else "mastered"
    )
    return {
        "summary": f"Answered {right} of {len(answers)} questions correctly.",
        "masteryLevel": level,
        "strengths": [p["name"] for p in points if (p.get("mastery") or 0) >= 0.6][:20],
        "weaknesses": [p["name"] for p in points if (p.get("mastery") or 0) < 0.6][:20],
    }


def _weak_points(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    points = [p for p in snapshot.get("knowledgePoints") or [] if (p.get("mastery") or 0) < 0.6]
    return {
        "weakPoints": [
            {
                "knowledgePointId": p["id"],
                "title": p["name"],
                "reason": "Low mastery in recent answers.",
                "severity": "high" if (p.get("mastery") or 0) < 0.3 else "medium",
                "confidence": 70,
            }
            for p in points[:50]
        ]
    }


def _next_actions(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    points = snapshot.get("knowledgePoints") or [{"id": None, "name": "the material"}]
    return {
        "actions": [
            {
                "actionType": "review" if index == 0 else "practice",
                "title": f"Work on {p['name']}",
                "reason": "It is where the most progress can be made.",
                "knowledgePointId": p.get("id"),
                "priority": index,
            }
            for index, p in enumerate(points[:5])
        ]
    }


def _quiz(snapshot: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    title = (snapshot.get("material") or {}).get("title", "the material")
    count = int(params.get("count", 5))
    return {
        "questions": [
            {
                "questionType": "single_choice",
                "stem": f"Question {n + 1} about {title}?",
                "choices": [{"key": k, "text": f"Option {k}"} for k in "ABCD"],
                "answer": "A",
                "explanation": "Option A is what the material says.",
                "difficulty": "medium",
            }
            for n in range(count)
        ]
    }


def _cards(snapshot: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    title = (snapshot.get("material") or {}).get("title", "the material")
    return {
        "cards": [
            {"front": f"{title}: term {n + 1}", "back": f"Definition {n + 1}"}
            for n in range(int(params.get("count", 10)))
        ]
    }


Builder = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


def _echo(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    return {"echo": snapshot}


_BUILDERS: dict[str, Builder] = {
    "learning_state_analysis": _learning,
    "weak_point_analysis": _weak_points,
    "next_action_planning": _next_actions,
    "quiz_generation": _quiz,
    "flashcard_generation": _cards,
    "synthetic_echo": _echo,
}


def answer_for(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The schema-valid answer for the job the prompt describes."""
    system = next((m.get("content", "") for m in messages if m.get("role") == "system"), "")
    user = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
    match = _JOB_TYPE.search(system)
    blocks = _FENCED.findall(user)
    snapshot = json.loads(blocks[0]) if blocks else {}
    params = json.loads(blocks[1]) if len(blocks) > 1 else {}
    builder = _BUILDERS.get(
        match.group(1) if match else "synthetic_echo", _BUILDERS["synthetic_echo"]
    )
    return builder(snapshot, params)


# -- the server -------------------------------------------------------------------------------


def key_label(api_key: str) -> str:
    """How a key appears in the stats: its first 6 and last 4 characters, as dashboards show."""
    return f"{api_key[:6]}...{api_key[-4:]}" if len(api_key) > 12 else "short-key"


class _State:
    def __init__(self, default_fault: str, limits: KeyLimits | None = None) -> None:
        self.default_fault = default_fault
        self.queued: deque[str] = deque()
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.limits = ProviderLimits(limits or KeyLimits())
        self.in_progress = 0
        self.keys: dict[str, Counter[str]] = {}

    def started(self, key: str) -> None:
        with self.lock:
            self.in_progress += 1
            self.counts["max_concurrent"] = max(self.counts["max_concurrent"], self.in_progress)
            per_key = self.keys.setdefault(key_label(key), Counter())
            per_key["requests"] += 1
            per_key["in_progress"] += 1
            per_key["max_concurrent"] = max(per_key["max_concurrent"], per_key["in_progress"])

    def ended(self, key: str) -> None:
        with self.lock:
            self.in_progress -= 1
            self.keys[key_label(key)]["in_progress"] -= 1

    def rate_limited(self, key: str, *, admitted: bool) -> None:
        """A 429 answered: by the limits (not admitted) or by a scripted fault (admitted)."""
        with self.lock:
            self.counts["rate_limited"] += 1
            per_key = self.keys.setdefault(key_label(key), Counter())
            per_key["requests"] += 0 if admitted else 1
            per_key["rate_limited"] += 1

    def stats(self) -> dict[str, Any]:
        with self.lock:
            stats: dict[str, Any] = {"requests": 0, "rate_limited": 0, "max_concurrent": 0}
            stats |= dict(self.counts)
            stats["in_progress"] = self.in_progress
            stats["keys"] = {label: dict(counts) for label, counts in self.keys.items()}
            return stats

    def next_fault(self, prompt: str) -> str:
        marker = _MARKER.search(prompt)
        with self.lock:
            if marker:
                fault = marker.group(1)
            elif self.queued:
                fault = self.queued.popleft()
            else:
                fault = self.default_fault
            self.counts["requests"] += 1
            self.counts[f"fault:{fault or 'none'}"] += 1
            return fault


class _Handler(BaseHTTPRequestHandler):
    server: ScriptedModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests carry prompts; the server logs nothing about them

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length", "0"))
        return json.loads(self.rfile.read(length) or b"{}")

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._send(
                200,
                {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "aijob"}]},
            )
        elif self.path == "/control/stats":
            self._send(200, self.server.state.stats())
        else:
            self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        if self.path == "/control/faults":
            faults = [str(f) for f in self._body().get("faults", [])]
            with self.server.state.lock:
                self.server.state.queued.extend(faults)
            self._send(200, {"queued": len(faults)})
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            return
        request = self._body()
        messages = request.get("messages") or []
        prompt = "\n".join(str(m.get("content", "")) for m in messages)
        fault = self.server.state.next_fault(prompt)
        key = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        tokens = len(prompt) // 4 + int(request.get("max_tokens") or 256)
        state = self.server.state
        admission = state.limits.admit(key, tokens, time.monotonic())
        if not admission.admitted:
            state.rate_limited(key, admitted=False)
            retry_after = str(max(1, math.ceil(admission.retry_after_s)))
            error = {"message": "Rate limit reached.", "type": "rate_limit_error"}
            self._send(429, {"error": error}, {"Retry-After": retry_after, **admission.headers})
            return
        state.started(key)
        try:
            self._answer(request, messages, prompt, fault, admission.headers)
            if fault.partition(":")[0] == "429":
                state.rate_limited(key, admitted=True)
        finally:
            state.ended(key)
            state.limits.done(key)

    def _answer(
        self,
        request: dict[str, Any],
        messages: list[dict[str, Any]],
        prompt: str,
        fault: str,
        headers: dict[str, str],
    ) -> None:
        name, _, argument = fault.partition(":")
        if name == "latency":
            time.sleep(int(argument or "100") / 1000)
        elif name == "hang":
            time.sleep(3_600)
            return
        elif name == "429":
            retry_after = argument or "1"
            self._send(
                429,
                {"error": {"message": "rate limited", "type": "rate_limit_error"}},
                {"Retry-After": retry_after, **headers},
            )
            return
        elif name in _ERRORS:
            status, error = _ERRORS[name]
            self._send(status, {"error": error})
            return
        elif name in {"401", "403"}:
            error = {"message": "invalid api key", "type": "authentication_error"}
            self._send(int(name), {"error": error})
            return
        elif name == "context":
            error = {
                "message": "This model's maximum context length is 65536 tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
            self._send(400, {"error": error})
            return
        content = json.dumps(answer_for(messages), ensure_ascii=False)
        finish = "stop"
        if name == "malformed":
            content = "{this is not json"
        elif name == "schema":
            content = json.dumps({"unexpected": "shape"})
        elif name == "length":
            content, finish = content[: len(content) // 2], "length"
        elif name == "fenced":
            content = f"```json\n{content}\n```"
        self._send(200, _completion(request.get("model", MODEL), content, finish, prompt), headers)


#: Faults that are one error answer: status and the OpenAI-style error object.
_ERRORS: dict[str, tuple[int, dict[str, Any]]] = {
    "500": (500, {"message": "scripted failure", "type": "server_error"}),
    "503": (503, {"message": "Server overloaded, please retry shortly.", "type": "server_error"}),
    "400": (
        400,
        {
            "message": "Unsupported parameter: 'response_format' in this context.",
            "type": "invalid_request_error",
            "code": "unsupported_parameter",
        },
    ),
    "402": (402, {"message": "Insufficient Balance", "type": "unknown_error"}),
    "404": (
        404,
        {
            "message": "The model `no-such-model` does not exist.",
            "type": "invalid_request_error",
            "code": "model_not_found",
        },
    ),
    "422": (422, {"message": "Invalid parameters: temperature", "type": "invalid_request_error"}),
}


def _completion(model: str, content: str, finish: str, prompt: str) -> dict[str, Any]:
    prompt_tokens, completion_tokens = max(1, len(prompt) // 4), max(1, len(content) // 4)
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
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class ScriptedModelServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        fault: str = "",
        limits: KeyLimits | None = None,
    ) -> None:
        super().__init__((host, port), _Handler)
        self.state = _State(fault, limits)

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="scripted-model", daemon=True)
        thread.start()
        return thread


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runtime_service.scripted_model", description=__doc__
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8400)
    parser.add_argument("--fault", default="", help="apply this fault to every request")
    parser.add_argument("--rpm", type=int, default=0, help="requests per minute per key")
    parser.add_argument("--tpm", type=int, default=0, help="tokens per minute per key")
    parser.add_argument("--concurrency", type=int, default=0, help="calls at once per key")
    args = parser.parse_args(argv)
    limits = KeyLimits(rpm=args.rpm, tpm=args.tpm, concurrency=args.concurrency)
    server = ScriptedModelServer(args.host, args.port, args.fault, limits)
    print(f"scripted model serving the OpenAI API at {server.base_url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A scripted model server that speaks enough of the OpenAI API for ``openai.AsyncOpenAI``.

    python -m devtools.scripted_model --port 8400 [--fault NAME]

``POST /v1/chat/completions`` answers schema-valid JSON for each job type, built from the snapshot
in the prompt, with usage counts; ``GET /v1/models`` lists one model. Faults, to exercise the
client's error paths for real:

    latency:MS   answer after MS milliseconds        429[:S]   rate limited, Retry-After S (1)
    gate         answer once the server's ``state.gate`` is set (tests hold a call in progress)
    drip:MS      stream the answer in 20 pieces spread over MS milliseconds (a long generation)
    stall:MS     stream the first piece, then nothing for MS milliseconds, then the rest
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

Overload, as DeepSeek behaves under load (``--overload C``): past C calls in progress the others
are held open until a place frees — a non-streaming request gets its 200 headers at once and a
blank line every ``--keepalive-s``, a streaming one ``: keep-alive`` comments — and a request
held longer than ``--overload-hold-s`` ends with a 503 error (as the status when nothing was sent
yet, else as the body or the stream's last event, the way a provider that already said 200 can).
``"stream": true`` is answered as server-sent events (with a usage chunk when
``stream_options.include_usage``). A prompt answered before hits the context cache: its whole
64-token blocks are reported as cached prompt tokens.

``GET /control/stats``: ``requests``, ``rate_limited``, ``max_concurrent`` (calls in progress at
once, at most), ``in_progress``, ``held`` (calls ever held open), ``holding`` (held now),
``max_open`` (in progress and held at once, at most), ``overloaded`` (held too long),
``abandoned`` (held, and the caller left), per-fault counts,
``keys``: the same per key, each key shown as a fingerprint (:func:`key_label`),
``user_ids``: each ``user_id`` seen, with its count, ``completion_tokens`` (a quarter of the
characters each call wrote, a call cut short counting what it sent) and
``call_completion_tokens``, the same per call in order.

Chat prefix completion, as DeepSeek's beta serves it (``POST /beta/chat/completions``, the last
message an assistant's with ``"prefix": true``): the rest of the scripted answer after the prefix.
On ``/v1`` a prefix is refused with 400.

DeepSeek today (*Rate Limit & Isolation*): ``--account-concurrency N`` caps calls at once across
every API key (the account), ``--user-concurrency N`` the calls of one ``user_id`` (a request
without one counts as the empty id); past either, 429 (``max_account_concurrent`` and
``max_user_concurrent`` in the stats). A ``user_id`` outside ``[A-Za-z0-9_-]`` or over 512 bytes
is refused with 400 (``bad_user_id``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import re
import sys
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from devtools.scripted_limits import KeyLimits, ProviderLimits

__all__ = ["AccountLimits", "Overload", "ScriptedModelServer", "answer_for", "key_label"]

MODEL = "scripted-deepseek"
_JOB_TYPE = re.compile(r"^job_type: ([\w-]+)$", re.MULTILINE)
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


def _words(snapshot: dict[str, Any]) -> list[str]:
    return [w for w in str(snapshot.get("answer") or "").split() if len(w) > 3][:10]


def _recall(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    words = _words(snapshot)
    return {
        "score": min(100, 10 * len(words)),
        "recalledPoints": words[:5],
        "missedPoints": [] if len(words) >= 5 else ["the rest of the material"],
        "feedback": f"You recalled {len(words[:5])} key points.",
    }


def _feynman(snapshot: dict[str, Any], _params: dict[str, Any]) -> dict[str, Any]:
    words = _words(snapshot)
    return {
        "score": min(100, 10 * len(words)),
        "clarity": 80 if words else 20,
        "gaps": [] if words else ["the explanation is empty"],
        "misconceptions": [],
        "feedback": "A clear explanation in your own words." if words else "Explain it again.",
    }


_BUILDERS: dict[str, Builder] = {
    "active-recall": _recall,
    "feynman-evaluation": _feynman,
    "learning_state_analysis": _learning,
    "weak_point_analysis": _weak_points,
    "next_action_planning": _next_actions,
    "quiz_generation": _quiz,
    "flashcard_generation": _cards,
    "synthetic_echo": _echo,
}


def register_answer(job_type: str, builder: Builder) -> None:
    """Teach the server the answer of a job type it does not know (Adding a job type, in
    docs/architecture.md): ``builder(snapshot, params)`` returns a schema-valid output."""
    _BUILDERS[job_type] = builder


def forget_answer(job_type: str) -> None:
    _BUILDERS.pop(job_type, None)


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


@dataclass(frozen=True, slots=True)
class AccountLimits:
    """DeepSeek's limits today (*Rate Limit & Isolation*): calls at once per account, across
    every API key, and, for accounts with raised quotas, per ``user_id`` (a request without one
    counts as the empty id). 0 is no limit; beyond a limit, HTTP 429."""

    concurrency: int = 0
    per_user: int = 0


#: DeepSeek's ``user_id``: letters, digits, ``_`` and ``-``, at most 512 bytes.
_USER_ID = re.compile(r"^[A-Za-z0-9_-]{1,512}$")


@dataclass(frozen=True, slots=True)
class Overload:
    """Hold calls past ``places`` in progress; a hold longer than ``hold_s`` ends in a 503."""

    places: int
    hold_s: float = 30.0
    keepalive_s: float = 1.0


class _State:
    def __init__(
        self,
        default_fault: str,
        limits: KeyLimits | None = None,
        overload: Overload | None = None,
        account: AccountLimits | None = None,
    ) -> None:
        self.default_fault = default_fault
        self.account = account or AccountLimits()
        #: Calls at once on the account, and per user id (the empty id too).
        self.account_in_progress = 0
        self.user_in_progress: Counter[str] = Counter()
        #: Every user_id seen, with how many calls carried it.
        self.user_ids: Counter[str] = Counter()
        self.queued: deque[str] = deque()
        self.counts: Counter[str] = Counter()
        #: Completion tokens each call wrote (a call cut short counts what it sent).
        self.call_completion_tokens: list[int] = []
        self.lock = threading.Lock()
        self.places = threading.Condition(self.lock)
        #: What the ``gate`` fault waits for.
        self.gate = threading.Event()
        self.limits = ProviderLimits(limits or KeyLimits())
        self.overload = overload
        self.in_progress = 0
        #: Calls held open right now, waiting for a place.
        self.holding = 0
        #: Digests of the prompts answered: a repeat hits the context cache.
        self.prompts: set[bytes] = set()
        self.keys: dict[str, Counter[str]] = {}

    def enter_account(self, user_id: str) -> bool:
        """Take a place on the account (and the user id's); False past either limit."""
        with self.lock:
            account = self.account
            if account.concurrency and self.account_in_progress >= account.concurrency:
                return False
            if account.per_user and self.user_in_progress[user_id] >= account.per_user:
                return False
            self.account_in_progress += 1
            self.user_in_progress[user_id] += 1
            self.counts["max_account_concurrent"] = max(
                self.counts["max_account_concurrent"], self.account_in_progress
            )
            most = max(self.counts["max_user_concurrent"], self.user_in_progress[user_id])
            self.counts["max_user_concurrent"] = most
            return True

    def leave_account(self, user_id: str) -> None:
        with self.lock:
            self.account_in_progress -= 1
            self.user_in_progress[user_id] -= 1

    def saw_user_id(self, user_id: str) -> None:
        with self.lock:
            self.user_ids[user_id] += 1

    def must_hold(self) -> bool:
        with self.lock:
            return self.overload is not None and self.in_progress >= self.overload.places

    def hold(self) -> None:
        """A call is held open until a place frees."""
        with self.lock:
            self.counts["held"] += 1
            self.holding += 1
            self._note_open()

    def take_place(self, key: str, wait_s: float) -> bool:
        """Start ``key``'s held call if a place is free within ``wait_s``."""
        assert self.overload is not None
        with self.places:
            if self.in_progress >= self.overload.places:
                self.places.wait(timeout=wait_s)
            if self.in_progress >= self.overload.places:
                return False
            self.holding -= 1
            self._start(key)
            return True

    def release_hold(self, *, overloaded: bool) -> None:
        """A held call ends without a place: held too long (``overloaded``), or its caller left."""
        with self.lock:
            self.holding -= 1
            self.counts["overloaded" if overloaded else "abandoned"] += 1

    def _note_open(self) -> None:
        open_calls = self.in_progress + self.holding
        self.counts["max_open"] = max(self.counts["max_open"], open_calls)

    def started(self, key: str) -> None:
        with self.lock:
            self._start(key)

    def _start(self, key: str) -> None:
        """A call starts (the caller holds the lock)."""
        self.in_progress += 1
        self.counts["max_concurrent"] = max(self.counts["max_concurrent"], self.in_progress)
        self._note_open()
        per_key = self.keys.setdefault(key_label(key), Counter())
        per_key["requests"] += 1
        per_key["in_progress"] += 1
        per_key["max_concurrent"] = max(per_key["max_concurrent"], per_key["in_progress"])

    def ended(self, key: str) -> None:
        with self.places:
            self.in_progress -= 1
            self.keys[key_label(key)]["in_progress"] -= 1
            self.places.notify()

    def wrote(self, chars: int) -> None:
        """A call ended having written ``chars`` characters of completion."""
        tokens = math.ceil(chars / 4)
        with self.lock:
            self.counts["completion_tokens"] += tokens
            self.call_completion_tokens.append(tokens)

    def count(self, name: str) -> None:
        with self.lock:
            self.counts[name] += 1

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
            stats["holding"] = self.holding
            stats["keys"] = {label: dict(counts) for label, counts in self.keys.items()}
            stats["user_ids"] = dict(self.user_ids)
            stats["call_completion_tokens"] = list(self.call_completion_tokens)
            return stats

    def cached(self, prompt: str) -> bool:
        """Whether the prompt was seen before (its prefix is in the context cache); it is now."""
        digest = hashlib.sha256(prompt.encode()).digest()
        with self.lock:
            seen = digest in self.prompts
            self.prompts.add(digest)
            return seen

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
    #: The status line went out already (a held request): only the body is left to write.
    committed = False
    #: Called just before the answer's last bytes go out: the call no longer counts against the
    #: account (its caller may send the next one the moment it reads them).
    answered: Callable[[], None] = staticmethod(lambda: None)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests carry prompts; the server logs nothing about them

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        if self.committed:
            self.wfile.write(data)
            self.close_connection = True
            return
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
        if self.path.rstrip("/") not in {"/v1/chat/completions", "/beta/chat/completions"}:
            self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            return
        request = self._body()
        state = self.server.state
        if _prefix(request.get("messages") or []) is not None and not self.path.startswith("/beta"):
            state.count("prefix_without_beta")
            error = {
                "message": "Chat prefix completion is a beta feature: use the beta base URL.",
                "type": "invalid_request_error",
            }
            self._send(400, {"error": error})
            return
        user_id = request.get("user_id")
        if user_id is not None and not (
            isinstance(user_id, str) and _USER_ID.match(user_id) and len(user_id.encode()) <= 512
        ):
            state.count("bad_user_id")
            error = {"message": "Invalid user_id.", "type": "invalid_request_error"}
            self._send(400, {"error": error})
            return
        if user_id is not None:
            state.saw_user_id(user_id)
        if not state.enter_account(user_id or ""):
            state.rate_limited("account", admitted=False)
            error = {"message": "Concurrency limit reached.", "type": "rate_limit_error"}
            self._send(429, {"error": error}, {"Retry-After": "1"})
            return
        left = threading.Event()

        def leave() -> None:
            if not left.is_set():
                left.set()
                state.leave_account(user_id or "")

        self.answered = leave
        try:
            self._completion(request, state)
        finally:
            leave()

    def _completion(self, request: dict[str, Any], state: _State) -> None:
        messages = request.get("messages") or []
        prompt = "\n".join(str(m.get("content", "")) for m in messages)
        fault = state.next_fault(prompt)
        key = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        tokens = len(prompt) // 4 + int(request.get("max_tokens") or 256)
        admission = state.limits.admit(key, tokens, time.monotonic())
        if not admission.admitted:
            state.rate_limited(key, admitted=False)
            retry_after = str(max(1, math.ceil(admission.retry_after_s)))
            error = {"message": "Rate limit reached.", "type": "rate_limit_error"}
            self._send(429, {"error": error}, {"Retry-After": retry_after, **admission.headers})
            return
        if not self._place(state, key, bool(request.get("stream"))):
            state.limits.done(key)
            return
        try:
            self._answer(request, messages, prompt, fault, admission.headers)
            if fault.partition(":")[0] == "429":
                state.rate_limited(key, admitted=True)
        finally:
            state.ended(key)
            state.limits.done(key)

    def _place(self, state: _State, key: str, streaming: bool) -> bool:
        """Start the call, after holding it open while the server is overloaded; False when the
        hold ran out (answered 503)."""
        overload = state.overload
        if overload is None or not state.must_hold():
            state.started(key)
            return True
        state.hold()
        try:
            return self._held(state, key, overload, streaming)
        except OSError:  # the caller went away while held
            state.release_hold(overloaded=False)
            self.close_connection = True
            return False

    def _held(self, state: _State, key: str, overload: Overload, streaming: bool) -> bool:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if streaming else "application/json")
        self.send_header("Connection", "close")
        self.end_headers()
        self.committed = True
        keepalive = b": keep-alive\n\n" if streaming else b"\n"
        held_until = time.monotonic() + overload.hold_s
        while not state.take_place(key, min(overload.keepalive_s, overload.hold_s)):
            if time.monotonic() >= held_until:
                state.release_hold(overloaded=True)
                error = {"error": _ERRORS["503"][1]}
                self.close_connection = True
                with contextlib.suppress(OSError):  # the caller may be gone too
                    self.wfile.write(
                        f"data: {json.dumps(error)}\n\n".encode()
                        if streaming
                        else json.dumps(error).encode()
                    )
                return False
            self.wfile.write(keepalive)
            self.wfile.flush()
        return True

    def _answer(
        self,
        request: dict[str, Any],
        messages: list[dict[str, Any]],
        prompt: str,
        fault: str,
        headers: dict[str, str],
    ) -> None:
        name, _, argument = fault.partition(":")
        if name == "latency" or (name in {"drip", "stall"} and not request.get("stream")):
            time.sleep(int(argument or "100") / 1000)
        elif name == "hang":
            time.sleep(3_600)
            return
        elif name == "gate":
            self.server.state.gate.wait(timeout=3_600)
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
        content, finish = _content(name, messages, request.get("max_tokens"))
        model = request.get("model", MODEL)
        usage = _usage(prompt, content, cached=self.server.state.cached(prompt))
        if request.get("stream"):
            wanted = bool((request.get("stream_options") or {}).get("include_usage"))
            pieces = 20 if name == "drip" else max(1, math.ceil(len(content) / 64))
            events = _chunks(model, content, finish, usage if wanted else None, pieces)
            self._stream(events, headers, _pauses(name, argument, len(events)))
            return
        self.answered()
        self.server.state.wrote(len(content))
        self._send(200, _completion(model, content, finish, usage), headers)

    def _stream(
        self, events: list[dict[str, Any]], headers: dict[str, str], pauses: list[float]
    ) -> None:
        """The events, each after its pause (seconds)."""
        if not self.committed:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
        written = 0
        try:
            for event, pause in zip(events, pauses, strict=True):
                if pause:
                    self.wfile.flush()
                    time.sleep(pause)
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                for choice in event.get("choices") or ():
                    written += len(choice["delta"].get("content") or "")
            self.answered()
            self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True
        finally:
            # What a caller that went away mid-answer was sent is what it is billed.
            self.server.state.wrote(written)


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


#: Providers cache prompt prefixes in blocks of this many tokens (DeepSeek: 64).
CACHE_BLOCK = 64


def _usage(prompt: str, content: str, *, cached: bool) -> dict[str, Any]:
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


def _prefix(messages: list[dict[str, Any]]) -> str | None:
    """The text of a last assistant message with ``prefix: true`` (chat prefix completion)."""
    last = messages[-1] if messages else {}
    if last.get("role") == "assistant" and last.get("prefix") is True:
        return str(last.get("content") or "")
    return None


def _content(fault: str, messages: list[dict[str, Any]], cap: Any) -> tuple[str, str]:
    """The answer's text and finish reason, as the fault shapes it; cut at ``max_tokens``. With
    a prefix (chat prefix completion), the rest of the scripted answer after it."""
    content = json.dumps(answer_for(messages), ensure_ascii=False)
    prefix = _prefix(messages)
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


def _pauses(fault: str, argument: str, count: int) -> list[float]:
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


def _chunks(
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


def _completion(model: str, content: str, finish: str, usage: dict[str, Any]) -> dict[str, Any]:
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


class ScriptedModelServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        fault: str = "",
        limits: KeyLimits | None = None,
        overload: Overload | None = None,
        *,
        account: AccountLimits | None = None,
    ) -> None:
        super().__init__((host, port), _Handler)
        self.state = _State(fault, limits, overload, account)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client hanging up mid-answer is routine here (a cancelled or stalled stream, a
        test's client closing at exit): not worth socketserver's traceback on stderr."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="scripted-model", daemon=True)
        thread.start()
        return thread


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.scripted_model", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8400)
    parser.add_argument("--fault", default="", help="apply this fault to every request")
    parser.add_argument("--rpm", type=int, default=0, help="requests per minute per key")
    parser.add_argument("--tpm", type=int, default=0, help="tokens per minute per key")
    parser.add_argument("--concurrency", type=int, default=0, help="calls at once per key")
    parser.add_argument(
        "--account-concurrency", type=int, default=0, help="calls at once across every key"
    )
    parser.add_argument("--user-concurrency", type=int, default=0, help="calls at once per user_id")
    parser.add_argument(
        "--overload", type=int, default=0, help="hold calls past this many in progress"
    )
    parser.add_argument("--overload-hold-s", type=float, default=600.0)
    parser.add_argument("--keepalive-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    limits = KeyLimits(rpm=args.rpm, tpm=args.tpm, concurrency=args.concurrency)
    overload = (
        Overload(args.overload, args.overload_hold_s, args.keepalive_s) if args.overload else None
    )
    account = AccountLimits(args.account_concurrency, args.user_concurrency)
    server = ScriptedModelServer(
        args.host, args.port, args.fault, limits, overload, account=account
    )
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

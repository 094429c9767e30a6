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
    blank        whitespace only, finish "stop" (JSON Output's answer when it could not write JSON)
    think:MS     a thinking call waits MS milliseconds between its reasoning and its answer
    404          model not found                     402       insufficient balance
    400          400 "Unsupported parameter ... in this context" (not a context-length error)
    422          invalid parameters

A fault applies to every request (``--fault``), to the next requests in order (``POST
/control/faults`` with ``{"faults": [...]}``), to every request for one model for a span of
time (an outage: ``POST /control/outage`` with ``{"model": M, "fault": "503", "seconds": 60}``,
and ``"api_key"`` to strike that key alone, as a 402 does an unpaid account; ``hang`` holds
each call without a byte until the outage ends; ``seconds`` 0 ends it), or to
one request whose prompt contains ``scripted-fault=NAME``. A second provider is a second
server on another port.

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
``stream_options.include_usage``).

Thinking, as DeepSeek answers today: on by default at effort ``high``; a request's ``thinking``
``{"type": "disabled"}`` turns it off, its ``reasoning_effort`` (``low``, ``high``, ``max``) sets
the effort. A thinking call writes ``reasoning_content`` first (1, 3 or 6 tokens per token of its
answer at ``low``, ``high``, ``max``), counted as completion tokens
(``completion_tokens_details.reasoning_tokens``) and against ``max_tokens``. The context cache
follows DeepSeek's rule per ``user_id`` (devtools/scripted_cache.py): hits are reported in
whole 64-token blocks as ``prompt_cache_hit_tokens`` (and ``prompt_cache_miss_tokens``).
``state.prompts`` and ``state.efforts`` record each request's prompt and effort (``""``: off).

``GET /control/stats``: ``requests``, ``rate_limited``, ``max_concurrent`` (calls in progress at
once, at most), ``in_progress``, ``held`` (calls ever held open), ``holding`` (held now),
``max_open`` (in progress and held at once, at most), ``overloaded`` (held too long),
``abandoned`` (held, and the caller left), per-fault counts, ``model:M`` (requests for
model M) and ``outage:M`` (requests an outage of M answered),
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
import json
import math
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from devtools.scripted_answers import answer_for, forget_answer, register_answer
from devtools.scripted_limits import KeyLimits
from devtools.scripted_replies import (
    completion_body,
    content_for,
    pauses_for,
    prefix_of,
    reasoning_for,
    reasoning_pieces,
    stream_chunks,
    thinking_of,
    usage_of,
)
from devtools.scripted_state import USER_ID, AccountLimits, Overload, ScriptedState, key_label

__all__ = [
    "AccountLimits",
    "Overload",
    "ScriptedModelServer",
    "answer_for",
    "forget_answer",
    "key_label",
    "register_answer",
]

MODEL = "scripted-deepseek"


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
        if self.path == "/control/outage":
            body = self._body()
            model, fault = str(body.get("model", "")), str(body.get("fault", "503"))
            api_key = str(body.get("api_key", ""))
            self.server.state.outages.start(model, fault, float(body.get("seconds", 0)), api_key)
            self._send(200, {"model": model, "fault": fault})
            return
        if self.path.rstrip("/") not in {"/v1/chat/completions", "/beta/chat/completions"}:
            self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            return
        request = self._body()
        state = self.server.state
        if prefix_of(request.get("messages") or []) is not None and not self.path.startswith(
            "/beta"
        ):
            state.count("prefix_without_beta")
            error = {
                "message": "Chat prefix completion is a beta feature: use the beta base URL.",
                "type": "invalid_request_error",
            }
            self._send(400, {"error": error})
            return
        user_id = request.get("user_id")
        if user_id is not None and not (
            isinstance(user_id, str) and USER_ID.match(user_id) and len(user_id.encode()) <= 512
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

    def _completion(self, request: dict[str, Any], state: ScriptedState) -> None:
        messages = request.get("messages") or []
        prompt = "\n".join(str(m.get("content", "")) for m in messages)
        key = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        fault = state.next_fault(prompt, str(request.get("model") or ""), key)
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

    def _place(self, state: ScriptedState, key: str, streaming: bool) -> bool:
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

    def _held(self, state: ScriptedState, key: str, overload: Overload, streaming: bool) -> bool:
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
            # No byte, then the connection closes (an outage's hang lasts to its end).
            time.sleep(int(argument) / 1000 if argument else 3_600)
            self.close_connection = True
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
        state = self.server.state
        effort = thinking_of(request)
        state.saw_request(prompt, effort)
        reasoning = reasoning_for(effort, json.dumps(answer_for(messages), ensure_ascii=False))
        content, finish = content_for(name, messages, request.get("max_tokens"), reasoning)
        model = request.get("model", MODEL)
        user = str(request.get("user_id") or "")
        hit = state.cache.hit_chars(user, prompt)
        state.cache.store(user, prompt, content)
        usage = usage_of(prompt, content, hit_chars=hit, reasoning=reasoning)
        if request.get("stream"):
            wanted = bool((request.get("stream_options") or {}).get("include_usage"))
            pieces = 20 if name == "drip" else max(1, math.ceil(len(content) / 64))
            events = stream_chunks(
                model, content, finish, usage if wanted else None, pieces, reasoning=reasoning
            )
            thoughts = len(reasoning_pieces(reasoning))
            self._stream(events, headers, pauses_for(name, argument, len(events), thoughts))
            return
        self.answered()
        state.wrote(len(content))
        self._send(200, completion_body(model, content, finish, usage, reasoning), headers)

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
class ScriptedModelServer(ThreadingHTTPServer):
    daemon_threads = True
    #: The listen backlog. socketserver's default of 5 overflows when a fleet's calls connect
    #: together (every streamed answer closes its connection): the kernel drops the SYNs past
    #: it, and each dropped one costs its caller a retransmission (1 s, then 2, 4, ...), enough
    #: on a busy host to run a call past its job's timeout. A provider's front end does not.
    request_queue_size = 1024

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
        self.state = ScriptedState(fault, limits, overload, account)

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

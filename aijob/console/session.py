"""Signing in, and what guards every request.

A sign-in starts a session on the console's side: the cookie (HttpOnly, SameSite=Strict, Secure
when the console is reached over TLS) holds only the session's random id, never the bearer token,
and the session ends on sign-out, after an hour unused, or twelve hours after it began; a cookie
of an ended session is worth nothing. Sign-in attempts are limited per client, and every refused
token gets the same answer. Every form that changes something carries a token derived from the
session (a cross-site form cannot know it) and, when the browser says where it comes from, must
come from the console itself; no page is framed, and nothing but the console's own script and
styles runs."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from aiohttp import web

__all__ = [
    "COOKIE",
    "CSRF",
    "TOKEN",
    "Guard",
    "Sessions",
    "SignInLimit",
    "security_headers",
]

COOKIE = "aijob_console"
#: The signed-in token and its form token, on each request past the guard.
TOKEN = web.RequestKey("token", str)
CSRF = web.RequestKey("csrf", str)
#: Where a request without a session goes; these need none.
SIGN_IN = "/login"
OPEN_PATHS = frozenset({SIGN_IN, "/static/console.css", "/static/live.js"})
#: A session ends after this long unused, and this long after it began.
IDLE_S = 3_600.0
LONGEST_S = 12 * 3_600.0
#: Sessions kept at once (the least recently used end first).
MOST_SESSIONS = 1_000

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Clock = Callable[[], float]


@dataclass
class _Session:
    token: str
    began: float
    seen: float


class Sessions:
    """Signed-in sessions, by a random id; the token each one acts with stays here."""

    def __init__(
        self,
        *,
        idle_s: float = IDLE_S,
        longest_s: float = LONGEST_S,
        most: int = MOST_SESSIONS,
        clock: Clock = time.monotonic,
    ) -> None:
        self.idle_s = idle_s
        self.longest_s = longest_s
        self._most = most
        self._clock = clock
        self._sessions: OrderedDict[str, _Session] = OrderedDict()

    def start(self, token: str) -> str:
        now = self._clock()
        session_id = secrets.token_urlsafe(32)
        self._sessions[session_id] = _Session(token, now, now)
        while len(self._sessions) > self._most:
            self._sessions.popitem(last=False)
        return session_id

    def token_of(self, session_id: str) -> str | None:
        """The token of a live session (its use keeps it alive), None for any other id."""
        session = self._sessions.get(session_id)
        if session is None:
            return None
        now = self._clock()
        if now - session.seen > self.idle_s or now - session.began > self.longest_s:
            del self._sessions[session_id]
            return None
        session.seen = now
        self._sessions.move_to_end(session_id)
        return session.token

    def end(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)


class SignInLimit:
    """Sign-in attempts per client: ``burst`` at once, then one every ``every_s`` seconds."""

    def __init__(
        self,
        *,
        burst: int = 10,
        every_s: float = 6.0,
        most: int = 10_000,
        clock: Clock = time.monotonic,
    ) -> None:
        self._burst = burst
        self._every_s = every_s
        self._most = most
        self._clock = clock
        self._spent: OrderedDict[str, float] = OrderedDict()

    def allow(self, client: str) -> bool:
        """Whether ``client`` may try once more now (the try is counted)."""
        now = self._clock()
        # A client's attempts as the moment its allowance is used up to: never before now.
        used_until = max(self._spent.get(client, now), now)
        if used_until + self._every_s > now + self._burst * self._every_s:
            return False
        self._spent[client] = used_until + self._every_s
        self._spent.move_to_end(client)
        while len(self._spent) > self._most:
            self._spent.popitem(last=False)
        return True


class Guard:
    def __init__(
        self,
        secret: bytes | None = None,
        *,
        sessions: Sessions | None = None,
        trust_proxy: bool = False,
    ) -> None:
        #: Form tokens are an HMAC of the session's id under this process's secret.
        self._secret = secret or secrets.token_bytes(32)
        self.sessions = sessions or Sessions()
        #: Whether a proxy in front says how the browser reached it (X-Forwarded-Proto,
        #: X-Forwarded-For); otherwise those headers are anyone's and are ignored.
        self._trust_proxy = trust_proxy

    def form_token(self, session_id: str) -> str:
        return hmac.new(self._secret, session_id.encode(), hashlib.sha256).hexdigest()

    def secure(self, request: web.Request) -> bool:
        """Whether the browser reached the console over TLS (its own, or the trusted proxy's)."""
        if request.secure:
            return True
        forwarded = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip()
        return self._trust_proxy and forwarded.lower() == "https"

    def client_of(self, request: web.Request) -> str:
        """Who is signing in, for the sign-in limit: the peer, or the trusted proxy's client."""
        forwarded = request.headers.get("X-Forwarded-For", "").split(",")[0].strip()
        return forwarded if self._trust_proxy and forwarded else (request.remote or "")

    def signed_in(self, request: web.Request, response: web.StreamResponse, token: str) -> None:
        session_id = self.sessions.start(token)
        response.set_cookie(
            COOKIE,
            session_id,
            httponly=True,
            samesite="Strict",
            secure=self.secure(request),
            path="/",
            max_age=int(self.sessions.longest_s),
        )

    def signed_out(self, request: web.Request, response: web.StreamResponse) -> None:
        session_id = request.cookies.get(COOKIE)
        if session_id:
            self.sessions.end(session_id)
        response.del_cookie(COOKIE, path="/")

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "POST" and not _same_origin(request):
            raise web.HTTPForbidden(text="cross-site request refused")
        if request.path in OPEN_PATHS:
            return await handler(request)
        session_id = request.cookies.get(COOKIE, "")
        token = self.sessions.token_of(session_id) if session_id else None
        if token is None:
            if request.method == "POST":
                raise web.HTTPForbidden(text="sign in first")
            raise web.HTTPSeeOther(SIGN_IN)
        if request.method == "POST":
            form = await request.post()
            sent = str(form.get("csrf", ""))
            if not hmac.compare_digest(sent, self.form_token(session_id)):
                raise web.HTTPForbidden(text="this form did not come from the console")
        request[TOKEN] = token
        request[CSRF] = self.form_token(session_id)
        return await handler(request)


def _same_origin(request: web.Request) -> bool:
    """A request the browser says came from another site is refused (Origin, else Referer);
    one that says nothing is left to the form token."""
    source = request.headers.get("Origin") or request.headers.get("Referer")
    if not source or source == "null":
        return not source
    return urlsplit(source).netloc == request.host


@web.middleware
async def security_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        response = exc
        _harden(response)
        raise
    _harden(response)
    return response


def _harden(response: web.StreamResponse) -> None:
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self';"
        " frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    )
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["Cache-Control"] = "no-store"

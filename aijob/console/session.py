"""Signing in, and what guards every request: the token in an HttpOnly, SameSite=Strict cookie;
every form that changes something carries a token derived from it (a cross-site form cannot know
it) and, when the browser says where it comes from, must come from the console itself; no page
is framed, and nothing but the console's own script and styles runs."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from aiohttp import web

__all__ = ["COOKIE", "CSRF", "TOKEN", "Guard", "security_headers"]

COOKIE = "aijob_console"
#: The signed-in token and its form token, on each request past the guard.
TOKEN = web.RequestKey("token", str)
CSRF = web.RequestKey("csrf", str)
#: Where a request without a session goes; these need none.
SIGN_IN = "/login"
OPEN_PATHS = frozenset({SIGN_IN, "/static/console.css", "/static/live.js"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Guard:
    def __init__(self, secret: bytes | None = None) -> None:
        #: Form tokens are an HMAC of the session's token under this process's secret.
        self._secret = secret or secrets.token_bytes(32)

    def form_token(self, token: str) -> str:
        return hmac.new(self._secret, token.encode(), hashlib.sha256).hexdigest()

    @staticmethod
    def token_of(request: web.Request) -> str | None:
        return request.cookies.get(COOKIE) or None

    @staticmethod
    def signed_in(response: web.StreamResponse, token: str, *, secure: bool) -> None:
        response.set_cookie(
            COOKIE, token, httponly=True, samesite="Strict", secure=secure, path="/"
        )

    @staticmethod
    def signed_out(response: web.StreamResponse) -> None:
        response.del_cookie(COOKIE, path="/")

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "POST" and not _same_origin(request):
            raise web.HTTPForbidden(text="cross-site request refused")
        if request.path in OPEN_PATHS:
            return await handler(request)
        token = self.token_of(request)
        if token is None:
            if request.method == "POST":
                raise web.HTTPForbidden(text="sign in first")
            raise web.HTTPSeeOther(SIGN_IN)
        if request.method == "POST":
            form = await request.post()
            sent = str(form.get("csrf", ""))
            if not hmac.compare_digest(sent, self.form_token(token)):
                raise web.HTTPForbidden(text="this form did not come from the console")
        request[TOKEN] = token
        request[CSRF] = self.form_token(token)
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

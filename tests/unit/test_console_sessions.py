"""Console sessions without a browser: the cookie holds a random session id, never the bearer
token, and is worthless once signed out or expired; the cookie is Secure behind TLS (the
console's own, or a trusted proxy's); sign-in is limited per client and answers every refused
token alike; plain HTTP off loopback is refused unless asked for."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from aijob.client import PermissionDeniedError, UnauthenticatedError
from aijob.connection import ClientSettings
from aijob.console.render import Renderer
from aijob.console.server import ConsoleSetupError, tls_context
from aijob.console.session import COOKIE, Guard, Sessions, SignInLimit, security_headers
from aijob.console.views import Views
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb

ADMIN = "admin-token-of-the-session-tests"
SERVICE = "a-service-token-not-for-the-console"


class Scheduler:
    """Answers the sign-in's read as the scheduler would for each token."""

    def __init__(self, token: str) -> None:
        self._token = token
        self.calls: list[str] = []

    async def stats(self) -> admin_pb.QueueStats:
        if self._token == ADMIN:
            return admin_pb.QueueStats()
        if self._token == SERVICE:
            raise PermissionDeniedError(
                grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED", "", {}
            )
        raise UnauthenticatedError(grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED", "", {})

    async def redrive(self) -> int:
        self.calls.append("redrive")
        return 0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def _console(guard: Guard, limit: SignInLimit | None = None) -> TestClient[Any, Any]:
    app = web.Application(middlewares=[security_headers, guard.middleware])
    views = Views(Scheduler, Renderer(), guard, limit)  # type: ignore[arg-type]
    app.add_routes(views.routes())
    client = TestClient(TestServer(app))
    await client.start_server()
    return client


@pytest.fixture
async def clock() -> Clock:
    return Clock()


@pytest.fixture
async def console(clock: Clock) -> AsyncIterator[TestClient[Any, Any]]:
    client = await _console(Guard(sessions=Sessions(clock=clock)))
    try:
        yield client
    finally:
        await client.close()


async def _sign_in(client: TestClient[Any, Any], token: str, **headers: str) -> Any:
    return await client.post(
        "/login", data={"token": token}, allow_redirects=False, headers=headers
    )


async def _csrf(client: TestClient[Any, Any], session: str) -> str:
    page = await client.get("/confirm/redrive", cookies={COOKIE: session})
    text = await page.text()
    return text.split('name="csrf" value="', 1)[1].split('"', 1)[0]


async def test_the_cookie_holds_a_session_id_and_is_worthless_after_sign_out(
    console: TestClient[Any, Any],
) -> None:
    signed = await _sign_in(console, ADMIN)
    assert signed.status == 303
    cookie = signed.cookies[COOKIE]
    session = cookie.value
    assert ADMIN not in session and len(session) >= 40
    assert cookie["httponly"] and cookie["samesite"] == "Strict"
    assert int(cookie["max-age"]) == 12 * 3600
    csrf = await _csrf(console, session)
    out = await console.post(
        "/logout", data={"csrf": csrf}, cookies={COOKIE: session}, allow_redirects=False
    )
    assert out.status == 303
    # The same value, replayed after sign-out, acts for nobody.
    replay = await console.post("/actions/redrive", data={"csrf": csrf}, cookies={COOKIE: session})
    assert replay.status == 403
    page = await console.get("/", cookies={COOKIE: session}, allow_redirects=False)
    assert (page.status, page.headers["Location"]) == (303, "/login")
    # The raw token as a cookie is no session either.
    raw = await console.get("/", cookies={COOKIE: ADMIN}, allow_redirects=False)
    assert raw.status == 303


async def test_a_session_ends_unused_for_an_hour_and_twelve_hours_after_it_began(
    console: TestClient[Any, Any], clock: Clock
) -> None:
    session = (await _sign_in(console, ADMIN)).cookies[COOKIE].value
    for _ in range(13):  # used every 59 minutes: alive until its twelfth hour
        clock.now += 59 * 60
        page = await console.get(
            "/confirm/redrive", cookies={COOKIE: session}, allow_redirects=False
        )
        if clock.now <= 12 * 3600:
            assert page.status == 200, clock.now
        else:
            assert page.status == 303, clock.now
    idle = (await _sign_in(console, ADMIN)).cookies[COOKIE].value
    clock.now += 3601
    page = await console.get("/", cookies={COOKIE: idle}, allow_redirects=False)
    assert page.status == 303


@pytest.mark.parametrize(
    ("trust_proxy", "forwarded", "secure"),
    [(False, "", False), (False, "https", False), (True, "https", True), (True, "http", False)],
)
async def test_the_cookie_is_secure_behind_a_trusted_tls_proxy(
    clock: Clock, trust_proxy: bool, forwarded: str, secure: bool
) -> None:
    client = await _console(Guard(sessions=Sessions(clock=clock), trust_proxy=trust_proxy))
    try:
        headers = {"X-Forwarded-Proto": forwarded} if forwarded else {}
        signed = await _sign_in(client, ADMIN, **headers)
        assert bool(signed.cookies[COOKIE]["secure"]) is secure
    finally:
        await client.close()


async def test_every_refused_token_gets_one_answer(console: TestClient[Any, Any]) -> None:
    answers = {}
    for token in (SERVICE, "an-unknown-token"):
        refused = await _sign_in(console, token)
        assert refused.status == 403 and COOKIE not in refused.cookies
        answers[token] = (await refused.text()).split('id="login-error">', 1)[1].split("<", 1)[0]
    assert answers[SERVICE] == answers["an-unknown-token"]


async def test_sign_in_is_limited_per_client(clock: Clock) -> None:
    client = await _console(Guard(sessions=Sessions(clock=clock)), SignInLimit(clock=clock))
    try:
        statuses = [(await _sign_in(client, "wrong")).status for _ in range(11)]
        assert statuses == [403] * 10 + [429]
        # Even the right token waits its turn; the allowance comes back with time.
        assert (await _sign_in(client, ADMIN)).status == 429
        clock.now += 6
        assert (await _sign_in(client, ADMIN)).status == 303
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("listen", "extra", "refused"),
    [
        ("127.0.0.1:8088", {}, False),
        ("[::1]:8088", {}, False),
        ("localhost:8088", {}, False),
        ("0.0.0.0:8088", {}, True),
        ("0.0.0.0:8088", {"console_trust_proxy": True}, False),
        ("0.0.0.0:8088", {"console_allow_plain_http": True}, False),
        ("0.0.0.0:8088", {"console_tls_cert": "cert.pem"}, True),  # its key is missing
    ],
)
def test_plain_http_off_loopback_is_refused_unless_asked_for(
    listen: str, extra: dict[str, Any], refused: bool
) -> None:
    settings = ClientSettings(console_listen=listen, **extra)
    if refused:
        with pytest.raises(ConsoleSetupError):
            tls_context(settings)
    else:
        assert tls_context(settings) is None

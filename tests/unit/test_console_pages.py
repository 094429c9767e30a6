"""The console's guard, sessions and rendering without a browser or a scheduler (the browser test
is tests/e2e/test_console.py): a page without a live session sends to sign-in; a POST without
one, with a forged form token or from another site is refused before any call; the cookie holds
a session id, never the token, and is worthless once signed out or expired; sign-in is limited
per client and answers every refused token alike; text from the scheduler is escaped; a refusal
is shown as the scheduler answered it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from aijob.client import PermissionDeniedError
from aijob.console.render import Renderer
from aijob.console.session import COOKIE, Guard, security_headers
from aijob.console.views import Views
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.gen.aijob.v1 import types_pb2

TOKEN = "admin-token-for-the-page-tests"


class StubAdmin:
    """What the views call, answered from memory; ``calls`` records the actions."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        #: A session signed in with TOKEN.
        self.session = ""

    async def stats(self) -> admin_pb.QueueStats:
        return admin_pb.QueueStats(
            depths=[admin_pb.QueueDepth(queue_name="q", job_type="<b>t</b>", count=2)],
            model_keys=[
                admin_pb.ModelKeyStats(limit=_limit(model, scope)) for model, scope in _KEYS
            ],
        )

    async def model_limits(self) -> list[admin_pb.ModelLimit]:
        return [
            _limit("down-model", "platform", admin_pb.BREAKER_STATE_OPEN),
            _limit("probed-model", "user", admin_pb.BREAKER_STATE_HALF_OPEN),
        ]

    async def get(self, job_id: str) -> types_pb2.Job:
        if job_id.startswith("tree-"):
            parent = "" if job_id == "tree-root" else "tree-root"
            children = types_pb2.ChildCounts(running=1, succeeded=1) if not parent else None
            return types_pb2.Job(
                job_id=job_id,
                lifecycle_status="waiting",
                parent_job_id=parent,
                root_job_id="tree-root",
                children=children,
            )
        if job_id == "j-routed":
            return types_pb2.Job(
                job_id=job_id, lifecycle_status="succeeded", model_name="b", model_tier="fallback"
            )
        return types_pb2.Job(job_id=job_id, lifecycle_status="failed", error_code="X")

    async def tree(self, job_id: str) -> job_pb.GetJobTreeResponse:
        def node(job_id: str, parent: str, status: str) -> job_pb.TreeNode:
            return job_pb.TreeNode(
                job_id=job_id, parent_job_id=parent, job_type="t", lifecycle_status=status
            )

        return job_pb.GetJobTreeResponse(
            nodes=[
                node("tree-root", "", "waiting"),
                node("tree-a", "tree-root", "waiting"),
                node("tree-b", "tree-root", "succeeded"),
                node("tree-a1", "tree-a", "running"),
            ],
            cost_micros=1_234_500,
        )

    async def timeline(self, job_id: str) -> admin_pb.JobTimeline:
        return admin_pb.JobTimeline(
            snapshot_json='{"text": "<script>alert(1)</script>"}',
            attempts=[
                admin_pb.TimelineAttempt(attempt_no=1, model="a", model_tier="primary"),
                admin_pb.TimelineAttempt(attempt_no=2, model="b", model_tier="fallback"),
            ],
        )

    async def redrive(self) -> int:
        self.calls.append("redrive")
        raise PermissionDeniedError(
            grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED", "no", {}
        )


_KEYS = [("down-model", "platform"), ("probed-model", "user"), ("fine-model", "platform")]


def _limit(model: str, scope: str, breaker: int = 0) -> admin_pb.ModelLimit:
    return admin_pb.ModelLimit(
        provider="deepseek",
        model=model,
        credential_scope=scope,
        breaker_state=breaker,  # type: ignore[arg-type]
    )


@pytest.fixture
async def console() -> AsyncIterator[tuple[TestClient[Any, Any], StubAdmin]]:
    admin = StubAdmin()
    guard = Guard(b"s" * 32)
    admin.session = guard.sessions.start(TOKEN)
    app = web.Application(middlewares=[security_headers, guard.middleware])
    app.add_routes(Views(lambda _token: admin, Renderer(), guard).routes())  # type: ignore[arg-type, return-value]
    client = TestClient(TestServer(app))
    await client.start_server()
    try:
        yield client, admin
    finally:
        await client.close()


async def test_without_a_session_pages_send_to_sign_in_and_forms_are_refused(
    console: tuple[TestClient[Any, Any], StubAdmin],
) -> None:
    client, admin = console
    page = await client.get("/", allow_redirects=False)
    assert (page.status, page.headers["Location"]) == (303, "/login")
    assert (await client.post("/actions/redrive", data={"csrf": "x"})).status == 403
    assert admin.calls == []


async def test_a_forged_or_cross_site_form_is_refused_and_a_good_one_reaches_the_scheduler(
    console: tuple[TestClient[Any, Any], StubAdmin],
) -> None:
    client, admin = console
    cookies = {COOKIE: admin.session}
    confirm = await client.get("/confirm/redrive", cookies=cookies)
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', await confirm.text())
    assert match is not None
    csrf = match.group(1)
    forged = await client.post("/actions/redrive", data={"csrf": "0" * 64}, cookies=cookies)
    elsewhere = await client.post(
        "/actions/redrive",
        data={"csrf": csrf},
        cookies=cookies,
        headers={"Origin": "http://evil.example"},
    )
    assert (forged.status, elsewhere.status, admin.calls) == (403, 403, [])
    refused = await client.post("/actions/redrive", data={"csrf": csrf}, cookies=cookies)
    assert refused.status == 403 and "PERMISSION_DENIED" in await refused.text()
    assert admin.calls == ["redrive"]


async def test_text_from_the_scheduler_is_escaped_and_pages_are_locked_down(
    console: tuple[TestClient[Any, Any], StubAdmin],
) -> None:
    client, admin = console
    cookies = {COOKIE: admin.session}
    job = await client.get("/jobs/j-1", cookies=cookies)
    body = await job.text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert" not in body
    overview = await client.get("/", cookies=cookies)
    assert "&lt;b&gt;t&lt;/b&gt;" in await overview.text()
    policy = overview.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy


async def test_a_job_page_in_a_tree_shows_every_node_linked_and_the_total_cost(
    console: tuple[TestClient[Any, Any], StubAdmin],
) -> None:
    client, admin = console
    cookies = {COOKIE: admin.session}
    for page in ("tree-root", "tree-a1"):
        body = await (await client.get(f"/jobs/{page}", cookies=cookies)).text()
        table = body[body.index('<table id="tree">') :]
        table = table[: table.index("</table>")]
        links = re.findall(r'<td class="depth-(\d)"><a href="/jobs/([\w-]+)">', table)
        # Depth first, each under its parent.
        assert links == [("0", "tree-root"), ("1", "tree-a"), ("2", "tree-a1"), ("1", "tree-b")]
        assert '<strong id="tree-cost">$1.234500</strong>' in body
    # A job outside any tree has no tree section.
    assert 'id="tree"' not in await (await client.get("/jobs/j-1", cookies=cookies)).text()


async def test_the_model_page_shows_each_keys_breaker_and_a_job_the_tier_that_answered(
    console: tuple[TestClient[Any, Any], StubAdmin],
) -> None:
    client, admin = console
    cookies = {COOKIE: admin.session}
    body = await (await client.get("/limits", cookies=cookies)).text()
    cells = re.findall(
        r"<td>([\w-]+)</td><td>(platform|user)</td>.*?breaker-[\w-]+\">([\w-]+)<", body
    )
    assert cells == [
        ("down-model", "platform", "open"),
        ("probed-model", "user", "half-open"),
        ("fine-model", "platform", "closed"),
    ]
    assert 'action="/confirm/reset-breaker"' in body
    job = await (await client.get("/jobs/j-routed", cookies=cookies)).text()
    assert '<dd id="job-model">b (fallback tier)</dd>' in job
    assert "<td>a</td>" in job and "<td>b (fallback)</td>" in job

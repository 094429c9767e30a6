"""The console's pages and actions. Each page reads the admin API with the signed-in token and
renders a template (autoescaped: snapshot and output text is shown as text, never as HTML);
each action is a confirmation page (GET, naming what will change: a bulk action counts the jobs
first) and then a POST carrying the form token. The scheduler decides what the token may do; a
refusal is shown as it answered it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from google.protobuf import timestamp_pb2

from aijob.admin_client import breaker_text
from aijob.client import AdminClient, AijobError, PermissionDeniedError, UnauthenticatedError
from aijob.console.render import Renderer
from aijob.console.session import TOKEN, Guard, SignInLimit
from aijob.trees import depth_first
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import types_pb2

__all__ = ["Views"]

#: Jobs a bulk action may select at once (the count shown first says when a filter selects more).
BULK_MOST = 2_000
PAGE_SIZE = 25
FILTERS = (
    "user_id",
    "job_type",
    "lifecycle_status",
    "error_code",
    "created_after",
    "created_before",
)

Client = Callable[[str], AdminClient]


class Views:
    def __init__(
        self,
        client: Client,
        renderer: Renderer,
        guard: Guard,
        sign_ins: SignInLimit | None = None,
    ) -> None:
        self._client = client
        self._render = renderer
        self._guard = guard
        self._sign_ins = sign_ins or SignInLimit()

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/login", self.login_form),
            web.post("/login", self.login),
            web.post("/logout", self.logout),
            web.get("/", self.overview),
            web.get("/fragments/overview", self.overview_fragment),
            web.get("/jobs", self.jobs),
            web.get("/jobs/{job_id}", self.job),
            web.get("/fragments/jobs/{job_id}", self.job_fragment),
            web.get("/users", self.users),
            web.get("/limits", self.limits),
            web.get("/job-types", self.job_types),
            web.get("/audit", self.audit),
            web.get("/confirm/{action}", self.confirm),
            web.post("/actions/{action}", self.act),
        ]

    # -- signing in ---------------------------------------------------------------------------

    async def login_form(self, request: web.Request) -> web.Response:
        return self._render.page(request, "login.html", error="")

    async def login(self, request: web.Request) -> web.StreamResponse:
        if not self._sign_ins.allow(self._guard.client_of(request)):
            message = "Too many sign-in attempts from here; wait a minute and try again."
            return self._render.page(request, "login.html", error=message, status=429)
        token = str((await request.post()).get("token", "")).strip()
        try:
            await self._client(token).stats()
        except (UnauthenticatedError, PermissionDeniedError):
            # One answer for every token refused: whether it is another role's says too much.
            message = "That token is not an admin or viewer token." if token else "Enter a token."
            return self._render.page(request, "login.html", error=message, status=403)
        except AijobError as error:
            message = f"The scheduler did not answer: {error.code.name}"
            return self._render.page(request, "login.html", error=message, status=503)
        response = web.HTTPSeeOther("/")
        self._guard.signed_in(request, response, token)
        raise response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        response = web.HTTPSeeOther("/login")
        self._guard.signed_out(request, response)
        raise response

    # -- pages --------------------------------------------------------------------------------

    async def overview(self, request: web.Request) -> web.Response:
        return self._render.page(request, "overview.html", **await self._overview(request))

    async def overview_fragment(self, request: web.Request) -> web.Response:
        return self._render.fragment(request, "overview_live.html", **await self._overview(request))

    async def _overview(self, request: web.Request) -> dict[str, Any]:
        stats = await self._call(request, lambda admin: admin.stats())
        return {"stats": stats, "queues": _queues(stats), "finished": _finished(stats)}

    async def jobs(self, request: web.Request) -> web.Response:
        filters = _filters(request)
        page = await self._call(
            request,
            lambda admin: admin.page(
                PAGE_SIZE, request.query.get("page_token", ""), **_request_filters(filters)
            ),
        )
        return self._render.page(
            request, "jobs.html", filters=filters, jobs=page.jobs, next=page.next_page_token
        )

    async def job(self, request: web.Request) -> web.Response:
        return self._render.page(request, "job.html", **await self._job(request))

    async def job_fragment(self, request: web.Request) -> web.Response:
        return self._render.fragment(request, "job_live.html", **await self._job(request))

    async def _job(self, request: web.Request) -> dict[str, Any]:
        job_id = request.match_info["job_id"]
        job = await self._call(request, lambda admin: admin.get(job_id))
        timeline = await self._call(request, lambda admin: admin.timeline(job_id))
        rows = sorted(
            [("event", e) for e in timeline.events] + [("attempt", a) for a in timeline.attempts],
            key=lambda row: _seconds(row[1]),
        )
        in_tree = bool(job.parent_job_id) or any(
            getattr(job.children, status) for status in _CHILD_STATUSES
        )
        tree = await self._call(request, lambda admin: admin.tree(job_id)) if in_tree else None
        return {
            "job": job,
            "tree": tree,
            "tree_rows": depth_first(tree) if tree is not None else [],
            "rows": rows,
            "snapshot": _pretty(timeline.snapshot_json),
            "params": _pretty(timeline.params_json),
            "output": _pretty(job.result.output_json) if job.HasField("result") else "",
            "terminal": job.lifecycle_status in {"succeeded", "failed", "cancelled"},
        }

    async def users(self, request: web.Request) -> web.Response:
        user_id = request.query.get("user_id", "").strip()
        usage = None
        if user_id:
            usage = await self._call(
                request,
                lambda admin: admin.usage(
                    user_id, request.query.get("from", ""), request.query.get("to", "")
                ),
            )
        return self._render.page(request, "users.html", user_id=user_id, usage=usage)

    async def limits(self, request: web.Request) -> web.Response:
        stats = await self._call(request, lambda admin: admin.stats())
        limits = await self._call(request, lambda admin: admin.model_limits())
        breakers = {
            (m.provider, m.model, m.credential_scope): breaker_text(m.breaker_state) for m in limits
        }
        return self._render.page(
            request, "limits.html", keys=stats.model_keys, limits=limits, breakers=breakers
        )

    async def job_types(self, request: web.Request) -> web.Response:
        types = await self._call(request, lambda admin: admin.job_types())
        return self._render.page(request, "job_types.html", types=types, pretty=_pretty)

    async def audit(self, request: web.Request) -> web.Response:
        entries = await self._call(request, lambda admin: _first(admin.audit(100), 100))
        return self._render.page(request, "audit.html", entries=entries)

    # -- actions ------------------------------------------------------------------------------

    async def confirm(self, request: web.Request) -> web.Response:
        action = _action(request)
        fields = {k: v for k, v in request.query.items() if k != "csrf"}
        count = None
        if action.startswith("bulk-"):
            count = len(await self._selected(request, _filters(request)))
        return self._render.page(
            request, "confirm.html", action=action, fields=fields, count=count, most=BULK_MOST
        )

    async def act(self, request: web.Request) -> web.Response:
        action = _action(request)
        form = {k: str(v) for k, v in (await request.post()).items() if k != "csrf"}
        try:
            outcome = await ACTIONS[action](self, request, form)
        except AijobError as error:
            return self._render.page(request, "refused.html", error=error, status=_status(error))
        return self._render.page(request, "done.html", action=action, outcome=outcome)

    async def _cancel(self, request: web.Request, form: dict[str, str]) -> str:
        reply = await self._client(request[TOKEN]).cancel(form["job_id"])
        return f"{reply.outcome}: {reply.job.job_id}"

    async def _retry(self, request: web.Request, form: dict[str, str]) -> str:
        job = await self._client(request[TOKEN]).retry(form["job_id"])
        return f"retried as {job.job_id}"

    async def _bulk(self, request: web.Request, form: dict[str, str], *, retry: bool) -> str:
        admin = self._client(request[TOKEN])
        done = refused = 0
        for job in await self._selected(request, _filters_of(form)):
            try:
                await (admin.retry(job.job_id) if retry else admin.cancel(job.job_id))
                done += 1
            except AijobError as error:
                if error.code.name == "PERMISSION_DENIED":
                    raise
                refused += 1
        verb = "retried" if retry else "cancelled"
        return f"{verb} {done} jobs; {refused} refused (their state had changed)"

    async def _bulk_retry(self, request: web.Request, form: dict[str, str]) -> str:
        return await self._bulk(request, form, retry=True)

    async def _bulk_cancel(self, request: web.Request, form: dict[str, str]) -> str:
        return await self._bulk(request, form, retry=False)

    async def _redrive(self, request: web.Request, form: dict[str, str]) -> str:
        return f"redrove {await self._client(request[TOKEN]).redrive()} dead events"

    async def _limit(self, request: web.Request, form: dict[str, str]) -> str:
        limit = admin_pb.ModelLimit(
            provider=form.get("provider", "deepseek"),
            model=form["model"],
            credential_scope=form.get("credential_scope", "platform"),
            max_concurrency=_int(form, "max_concurrency"),
            requests_per_minute=_int(form, "requests_per_minute"),
            tokens_per_minute=_int(form, "tokens_per_minute"),
        )
        saved = await self._client(request[TOKEN]).put_model_limit(limit)
        return f"limit of {saved.provider}/{saved.model} ({saved.credential_scope}) set"

    async def _reset_breaker(self, request: web.Request, form: dict[str, str]) -> str:
        provider, model = form.get("provider", "deepseek"), form["model"]
        reset = await self._client(request[TOKEN]).reset_breaker(
            provider, model, form.get("credential_id", "")
        )
        was = "it was open" if reset.was_open else "it was not open"
        return f"breaker of {provider}/{model} closed ({was})"

    async def _budget(self, request: web.Request, form: dict[str, str]) -> str:
        user_id = form["user_id"]
        await self._client(request[TOKEN]).put_budget(
            user_id, _int(form, "daily_tokens"), _int(form, "daily_cost_micros")
        )
        return f"budget of {user_id} set"

    async def _selected(self, request: web.Request, filters: dict[str, str]) -> list[types_pb2.Job]:
        admin = self._client(request[TOKEN])
        jobs = await self._call(
            request, lambda _: _first(admin.list(200, **_request_filters(filters)), BULK_MOST)
        )
        return list(jobs)

    async def _call(
        self, request: web.Request, call: Callable[[AdminClient], Awaitable[Any]]
    ) -> Any:
        try:
            return await call(self._client(request[TOKEN]))
        except UnauthenticatedError:
            raise web.HTTPSeeOther("/login") from None
        except AijobError as error:
            raise _refused(self._render, request, error) from None


ACTIONS: dict[str, Callable[[Views, web.Request, dict[str, str]], Awaitable[str]]] = {
    "cancel": Views._cancel,
    "retry": Views._retry,
    "bulk-retry": Views._bulk_retry,
    "bulk-cancel": Views._bulk_cancel,
    "redrive": Views._redrive,
    "limit": Views._limit,
    "reset-breaker": Views._reset_breaker,
    "budget": Views._budget,
}


def _refused(renderer: Renderer, request: web.Request, error: AijobError) -> web.HTTPException:
    body = renderer.text(request, "refused.html", error=error)
    status = _status(error)
    kinds: dict[int, type[web.HTTPException]] = {
        403: web.HTTPForbidden,
        404: web.HTTPNotFound,
        400: web.HTTPBadRequest,
    }
    return kinds.get(status, web.HTTPBadGateway)(text=body, content_type="text/html")


def _status(error: AijobError) -> int:
    return {"PERMISSION_DENIED": 403, "NOT_FOUND": 404, "INVALID_ARGUMENT": 400}.get(
        error.code.name, 502
    )


def _action(request: web.Request) -> str:
    action = request.match_info["action"]
    if action not in ACTIONS:
        raise web.HTTPNotFound(text="no such action")
    return action


def _filters(request: web.Request) -> dict[str, str]:
    return _filters_of(dict(request.query))


def _filters_of(values: dict[str, str]) -> dict[str, str]:
    return {name: values.get(name, "").strip() for name in FILTERS}


def _request_filters(filters: dict[str, str]) -> dict[str, Any]:
    """The form's filters as AdminListJobsRequest fields (dates as UTC midnight)."""
    out: dict[str, Any] = {}
    for name, value in filters.items():
        if not value:
            continue
        if name.startswith("created_"):
            stamp = timestamp_pb2.Timestamp()
            try:
                stamp.FromDatetime(datetime.fromisoformat(value).replace(tzinfo=UTC))
            except ValueError:
                raise web.HTTPBadRequest(text=f"{name}: a date, YYYY-MM-DD") from None
            out[name] = stamp
        else:
            out[name] = value
    return out


def _int(form: dict[str, str], name: str) -> int:
    try:
        return max(0, int(form.get(name) or 0))
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name}: a whole number") from None


_CHILD_STATUSES = ("queued", "running", "waiting", "succeeded", "failed", "cancelled")


def _pretty(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=True)
    except ValueError:
        return text


async def _first(items: AsyncIterator[Any], most: int) -> list[Any]:
    out: list[Any] = []
    async for item in items:
        out.append(item)
        if len(out) >= most:
            break
    return out


def _queues(stats: admin_pb.QueueStats) -> list[dict[str, Any]]:
    """Queued, running and deferred per queue and job type, with the queue's oldest wait."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for depth in stats.depths:
        row = rows.setdefault(
            (depth.queue_name, depth.job_type),
            {"queue": depth.queue_name, "job_type": depth.job_type, "queued": 0, "running": 0},
        )
        if depth.lifecycle_status in ("queued", "running"):
            row[depth.lifecycle_status] = depth.count
    oldest = {age.queue_name: age.age_seconds for age in stats.oldest_queued}
    deferred = {d.queue_name: d.count for d in stats.deferred}
    for row in rows.values():
        row["oldest_s"] = oldest.get(row["queue"], 0.0)
        row["deferred"] = deferred.get(row["queue"], 0)
    return [rows[key] for key in sorted(rows)]


def _finished(stats: admin_pb.QueueStats) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, int | str]] = {}
    for depth in stats.finished_last_hour:
        row = rows.setdefault(
            depth.job_type,
            {"job_type": depth.job_type, "succeeded": 0, "failed": 0, "cancelled": 0},
        )
        row[depth.lifecycle_status] = depth.count
    return [rows[key] for key in sorted(rows)]


def _seconds(row: Any) -> float:
    stamp = row.occurred_at if hasattr(row, "occurred_at") else row.recorded_at
    seconds: float = stamp.seconds + stamp.nanos / 1e9
    return seconds

"""Templates (Jinja2, autoescaped) and the values they show: times in UTC, costs from
micro-units, ages in seconds."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from aiohttp import web
from google.protobuf import timestamp_pb2
from jinja2 import Environment, PackageLoader, select_autoescape

from aijob.console.session import CSRF, TOKEN

__all__ = ["Renderer"]

#: The pages in the navigation bar: (path, label).
NAV = (
    ("/", "Overview"),
    ("/jobs", "Jobs"),
    ("/users", "Users"),
    ("/limits", "Model limits"),
    ("/job-types", "Job types"),
    ("/audit", "Audit log"),
)


def _time(stamp: timestamp_pb2.Timestamp | None) -> str:
    if stamp is None or (stamp.seconds == 0 and stamp.nanos == 0):
        return "-"
    return stamp.ToDatetime(tzinfo=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _money(micros: int) -> str:
    return f"${micros / 1_000_000:,.6f}"


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7_200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3_600:.1f} h"


class Renderer:
    def __init__(self) -> None:
        self._env = Environment(
            loader=PackageLoader("aijob.console", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self._env.filters.update(time=_time, money=_money, age=_age)

    def text(self, request: web.Request, template: str, **context: Any) -> str:
        values = {
            "nav": NAV,
            "path": request.path,
            "here": request.path_qs,
            "csrf": request.get(CSRF, ""),
            "signed_in": TOKEN in request,
            **context,
        }
        return self._env.get_template(template).render(values)

    def page(
        self, request: web.Request, template: str, *, status: int = 200, **context: Any
    ) -> web.Response:
        return web.Response(
            text=self.text(request, template, **context), status=status, content_type="text/html"
        )

    fragment = page

"""deploy/: the Grafana dashboard and the Prometheus alert rules parse, and every query names
only metrics the scheduler and the runtime export (a renamed metric breaks this, not a pager)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import REGISTRY

import runtime_service.metrics
import scheduler_service.services.metrics

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
_METRIC = re.compile(r"\baijob_[a-z_]+")


def _exported() -> set[str]:
    assert scheduler_service.services.metrics and runtime_service.metrics  # imported: registered
    return {name for name in REGISTRY._names_to_collectors if name.startswith("aijob_")}


def _dashboard_queries() -> list[str]:
    dashboard: dict[str, Any] = json.loads((DEPLOY / "grafana/aijob-dashboard.json").read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def _alert_queries() -> list[str]:
    rules = yaml.safe_load((DEPLOY / "prometheus/aijob-alerts.yml").read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def test_every_query_names_an_exported_metric() -> None:
    exported = _exported()
    queries = _dashboard_queries() + _alert_queries()
    assert len(queries) >= 20
    for query in queries:
        names = _METRIC.findall(query)
        assert names, query
        unknown = [n for n in names if n not in exported]
        assert not unknown, f"{query}: {unknown} is not exported"


def test_the_alerts_cover_what_operators_are_paged_for() -> None:
    rules = yaml.safe_load((DEPLOY / "prometheus/aijob-alerts.yml").read_text())
    alerts = {rule["alert"]: rule for group in rules["groups"] for rule in group["rules"]}
    covered = " ".join(rule["expr"] for rule in alerts.values())
    for metric in (
        "aijob_queue_oldest_age_seconds",
        "aijob_outbox_dead_events",
        "aijob_lease_expiries_total",
        "aijob_model_rate_limited_total",
        "aijob_outbox_lag_seconds",
        "aijob_model_breaker_open",
    ):
        assert metric in covered
    assert all({"summary"} <= rule["annotations"].keys() for rule in alerts.values())

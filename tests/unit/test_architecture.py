"""The house as docs/architecture.md describes it: its layer table names every module of the
scheduler, every port stays small, and no module of either service passes 500 lines. (The
layers themselves are import contracts: ``lint-imports`` in ``make lint``.)"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from scheduler_service import ports

ROOT = Path(__file__).resolve().parents[2]
SCHEDULER = ROOT / "scheduler_service"
PORTS = [
    ports.JobStore,
    ports.JobReads,
    ports.JobSweeps,
    ports.GateStore,
    ports.ModelKeyStore,
    ports.SpendStore,
    ports.ResultStore,
    ports.OutboxStore,
    ports.OutputStore,
]


def _layer_table() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    start = text.index("## Layers and walls")
    return text[start : text.index("The walls, each checked", start)]


def _named(table: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", table))


def test_the_layer_table_names_every_module() -> None:
    named = _named(_layer_table())
    folders = {name for name in named if name.endswith("/")}
    modules = [
        path.relative_to(SCHEDULER).as_posix()
        for path in sorted(SCHEDULER.rglob("*.py"))
        if path.name != "__init__.py"
    ]
    unnamed = [
        module
        for module in modules
        if module not in named and not any(module.startswith(folder) for folder in folders)
    ]
    assert unnamed == []


@pytest.mark.parametrize("port", PORTS, ids=lambda port: port.__name__)
def test_every_port_has_at_most_15_methods(port: type) -> None:
    methods = [
        name
        for name, member in inspect.getmembers(port, inspect.isfunction)
        if not name.startswith("_")
    ]
    assert 0 < len(methods) <= 15, methods


@pytest.mark.parametrize("package", ["scheduler_service", "runtime_service"])
def test_no_module_passes_500_lines(package: str) -> None:
    long = {
        path.relative_to(ROOT).as_posix(): lines
        for path in (ROOT / package).rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > 500
    }
    assert long == {}

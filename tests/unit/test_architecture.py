"""The house as docs/architecture.md describes it: its layer table names every folder of the
scheduler, its port table is the ports as they are, every port and class stays small, and no
module of a shipped package or of devtools passes 500 lines. (The layers themselves are import
contracts, ``lint-imports``, and folder cycles are ``scripts/check_folder_cycles.py``, both in
``make lint``.)"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
from pathlib import Path
from types import ModuleType

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
    ports.TreeStore,
    ports.WarmupStore,
    ports.RouteStore,
]


def _section(title: str, end: str) -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    start = text.index(title)
    return text[start : text.index(end, start)]


def _named(table: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", table))


def test_the_layer_table_names_every_folder_and_entry_point() -> None:
    named = _named(_section("## Layers and walls", "The walls, each checked"))
    folders = {f"{path.name}/" for path in SCHEDULER.iterdir() if (path / "__init__.py").exists()}
    top_modules = {path.name for path in SCHEDULER.glob("*.py") if path.name != "__init__.py"}
    assert folders | top_modules <= named


def test_the_port_table_is_the_ports() -> None:
    rows = re.findall(
        r"^\| `(\w+)` \(`\w+`\) \|.*\| (\d+) \|$",
        _section("### One store per aggregate", "Every operation has one path"),
        re.MULTILINE,
    )
    assert dict((name, int(count)) for name, count in rows) == {
        port.__name__: len(_public_methods(port)) for port in PORTS
    }


def _public_methods(port: type) -> list[str]:
    return [
        name
        for name, member in inspect.getmembers(port, inspect.isfunction)
        if not name.startswith("_")
    ]


@pytest.mark.parametrize("port", PORTS, ids=lambda port: port.__name__)
def test_every_port_has_at_most_15_methods(port: type) -> None:
    assert 0 < len(_public_methods(port)) <= 15


#: What ships (the wheel's packages) and what develops it; generated code aside.
PACKAGES = ["scheduler_service", "runtime_service", "shared", "aijob", "devtools"]


def _sources(package: str) -> list[Path]:
    return [path for path in (ROOT / package).rglob("*.py") if "gen" not in path.parts]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_passes_500_lines(package: str) -> None:
    long = {
        path.relative_to(ROOT).as_posix(): lines
        for path in _sources(package)
        if (lines := len(path.read_text().splitlines())) > 500
    }
    assert long == {}


@pytest.mark.parametrize("package", PACKAGES)
def test_no_class_has_more_than_15_public_methods(package: str) -> None:
    large = {}
    for path in _sources(package):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                methods = [
                    item.name
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                    and not item.name.startswith("_")
                ]
                if len(methods) > 15:
                    large[f"{path.relative_to(ROOT).as_posix()}:{node.name}"] = len(methods)
    assert large == {}


def _folder_cycle_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "check_folder_cycles", ROOT / "scripts" / "check_folder_cycles.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_folder_cycle_check_finds_a_cycle() -> None:
    check = _folder_cycle_check()
    assert check.cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert check.cycles({"a": {"b"}, "b": {"c"}}) == []


@pytest.mark.parametrize("package", [*PACKAGES, "bench"])
def test_no_folder_of_a_package_imports_one_that_imports_it_back(package: str) -> None:
    check = _folder_cycle_check()
    edges, _ = check.folder_graph(package)
    assert check.cycles(edges) == []

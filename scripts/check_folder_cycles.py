"""Fails when a package's folders import each other in a cycle: folder A's modules import folder
B's while B's, directly or through other folders, import A's. Folders are the layers of a
package (docs/architecture.md, *Layers and walls*), so a cycle between them is a layer that is
not one. Prints each cycle with an import that makes each of its edges."""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("scheduler_service", "runtime_service", "shared", "aijob", "devtools", "bench")
SKIPPED = ("shared/gen",)

Graph = dict[str, set[str]]


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _folder_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rsplit(".", 1)[0]


def _modules(package: str) -> dict[str, Path]:
    return {
        _module_of(path): path
        for path in sorted((ROOT / package).rglob("*.py"))
        if not any(path.relative_to(ROOT).as_posix().startswith(skip) for skip in SKIPPED)
    }


def _imported(module: str, path: Path) -> Iterable[str]:
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _known_prefix(name: str, modules: dict[str, Path]) -> str:
    """The module ``name`` is, or is inside of (``pkg.mod.Class`` is ``pkg.mod``); "" if none."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def folder_graph(package: str) -> tuple[Graph, dict[tuple[str, str], str]]:
    modules = _modules(package)
    edges: Graph = defaultdict(set)
    example: dict[tuple[str, str], str] = {}
    for module, path in modules.items():
        source = _folder_of(module, path)
        for imported in _imported(module, path):
            name = _known_prefix(imported, modules)
            if not name or name == module:
                continue
            target = _folder_of(name, modules[name])
            if target != source:
                edges[source].add(target)
                example.setdefault((source, target), f"{module} imports {name}")
    return edges, example


def cycles(edges: Graph) -> list[list[str]]:
    """The strongly connected components of more than one folder (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(set(edges) | {t for targets in edges.values() for t in targets}):
        if node not in index:
            visit(node)
    return found


def main() -> int:
    failed = False
    for package in PACKAGES:
        edges, example = folder_graph(package)
        for component in cycles(edges):
            failed = True
            print(f"folder cycle in {package}: {' <-> '.join(component)}")
            for source in component:
                for target in component:
                    if (source, target) in example:
                        print(f"    {example[(source, target)]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

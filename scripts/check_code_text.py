"""Fails when code cites an issue number: comments, docstrings and test names describe the code
as it is, and git keeps its history. Checks every tracked file of code (not the docs, not the
generated or vendored code); prints each hit as ``path:line: text``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = ("*.py", "*.pyi", "*.proto", "*.sh", "*.js", "*.html", "*.toml", "*.ini", "Makefile")
SKIPPED = ("third_party/", "shared/gen/")
ISSUE_NUMBER = re.compile(r"\bissue[ -]?#?\d+", re.IGNORECASE)


def code_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--", *CODE, ".ci/*"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return [path for path in listed if not path.startswith(SKIPPED)]


def hits(paths: list[str]) -> list[str]:
    found = []
    for path in paths:
        for number, line in enumerate((ROOT / path).read_text().splitlines(), start=1):
            if ISSUE_NUMBER.search(line):
                found.append(f"{path}:{number}: {line.strip()}")
    return found


def main() -> int:
    found = hits(code_files())
    for hit in found:
        print(hit)
    if found:
        print(f"{len(found)} issue number(s) in code: say what the code does, not its history")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

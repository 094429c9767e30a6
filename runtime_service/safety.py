"""Content safety: a pluggable check run on the input before the model call and on the output
after it. The shipped check is a configurable list of regular expressions."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol

__all__ = ["PatternSafetyCheck", "SafetyCheck"]


class SafetyCheck(Protocol):
    def violation(self, text: str) -> str | None:
        """A short name of the rule ``text`` breaks, or None."""


class PatternSafetyCheck:
    def __init__(self, patterns: Iterable[str]) -> None:
        self._patterns = [(index, re.compile(p)) for index, p in enumerate(patterns)]

    def violation(self, text: str) -> str | None:
        for index, pattern in self._patterns:
            if pattern.search(text):
                return f"pattern-{index}"  # never the matched text: it may be user content
        return None

"""AIJOB_CONTENT_SAFETY_PATTERNS splits between patterns, never inside one (``a{1,3}``
became two broken patterns)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime_service.settings import RuntimeSettings
from shared.config import split_patterns


@pytest.mark.parametrize(
    ("value", "patterns"),
    [
        ("a{1,3}", ["a{1,3}"]),
        ("a{1,3}, b", ["a{1,3}", "b"]),
        ("[,;]x,(?i)y", ["[,;]x", "(?i)y"]),
        ("(a,b)|c, d", ["(a,b)|c", "d"]),
        (r"one\,two, three", [r"one\,two", "three"]),
        ("[(]a, b", ["[(]a", "b"]),
        (" , a ,", ["a"]),
    ],
)
def test_patterns_split_only_between_patterns(value: str, patterns: list[str]) -> None:
    assert split_patterns(value) == patterns
    for pattern in patterns:
        re.compile(pattern)


@given(st.lists(st.sampled_from(["a{1,3}", "[,;]", r"x\,y", "(p|q,r)", "plain"]), min_size=1))
def test_any_list_of_patterns_joined_with_commas_comes_back(parts: list[str]) -> None:
    assert split_patterns(", ".join(parts)) == parts


def test_the_setting_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIJOB_CONTENT_SAFETY_PATTERNS", r"(?i)\bcard\s?\d{4,19}\b, bomb")
    settings = RuntimeSettings()
    assert settings.content_safety_patterns == [r"(?i)\bcard\s?\d{4,19}\b", "bomb"]

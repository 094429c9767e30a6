"""Canonical JSON and the output hash shared by runtime and scheduler."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.canonical_json import canonical_json, output_hash, result_idempotency_key


def test_keys_sorted_recursively_compact_utf8() -> None:
    value = {"b": 1, "a": {"z": [3, {"y": 2, "x": 1}], "é": "中文"}}
    assert canonical_json(value) == '{"a":{"z":[3,{"x":1,"y":2}],"é":"中文"},"b":1}'.encode()


def test_integers_stay_integers() -> None:
    assert canonical_json({"n": 10, "f": 1.5}) == b'{"f":1.5,"n":10}'


def test_hash_is_sha256_of_canonical_form() -> None:
    value = {"answer": 42}
    assert output_hash(value) == hashlib.sha256(b'{"answer":42}').hexdigest()
    assert len(output_hash(value)) == 64
    assert result_idempotency_key("job", 2, "ab" * 32) == f"job:2:{'ab' * 32}"


def test_non_finite_numbers_are_refused() -> None:
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), json_values))
def test_hash_ignores_key_order_and_whitespace(value: dict[str, Any]) -> None:
    shuffled = dict(reversed(list(value.items())))
    reparsed = json.loads(json.dumps(shuffled, indent=2))
    assert output_hash(reparsed) == output_hash(value)
    assert json.loads(canonical_json(value)) == value

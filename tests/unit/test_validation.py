"""Syntax checks on request fields, before any database access: each refusal names its field."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from scheduler_service.core import validation
from scheduler_service.core.errors import InvalidRequestError
from scheduler_service.core.ids import new_id
from shared.canonical_json import output_hash
from shared.error_codes import ErrorCode


def _field_of(call: object) -> str:
    with pytest.raises(InvalidRequestError) as caught:
        assert callable(call)
        call()
    return caught.value.field


def test_each_check_names_the_field_it_refuses() -> None:
    assert _field_of(lambda: validation.job_id("not an id; -- ")) == "job_id"
    assert _field_of(lambda: validation.attempt_no(0)) == "attempt_no"
    assert _field_of(lambda: validation.instance_id("")) == "runtime_instance_id"
    assert _field_of(lambda: validation.instance_id("a b")) == "runtime_instance_id"
    assert _field_of(lambda: validation.output_hash("A" * 64)) == "output_hash"
    assert _field_of(lambda: validation.progress(101)) == "progress"
    assert _field_of(lambda: validation.max_bytes("é" * 3, 5, "checkpoint")) == "checkpoint"
    assert _field_of(lambda: validation.json_document("{", "output_json")) == "output_json"


def test_good_values_pass_unchanged() -> None:
    job_id = new_id()
    assert validation.job_id(job_id) == job_id
    assert validation.attempt_no(1) == 1
    assert validation.instance_id("host-1:42/rt@a.b") == "host-1:42/rt@a.b"
    assert validation.output_hash(output_hash({"a": 1})) == output_hash({"a": 1})
    validation.max_bytes(b"x" * 5, 5, "checkpoint")  # the maximum itself is accepted


class _Card(BaseModel):
    front: str
    back: str


def test_a_schema_refusal_names_the_failing_path_and_its_code() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        validation.against_schema(_Card, {"front": "q"}, "output", ErrorCode.VALIDATION_FAILED)
    assert caught.value.code is ErrorCode.VALIDATION_FAILED
    assert caught.value.field == "output.back"


@given(st.integers())
def test_progress_is_accepted_exactly_from_0_to_100(value: int) -> None:
    if 0 <= value <= 100:
        assert validation.progress(value) == value
    else:
        with pytest.raises(InvalidRequestError):
            validation.progress(value)

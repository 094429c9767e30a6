"""The error catalogue's retryable flags (docs/architecture.md, *Retries and the error
catalogue*)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shared.error_codes import EXECUTION_CODES, ErrorCode, is_retryable, spec_of

RETRYABLE = [
    "MODEL_TIMEOUT",
    "MODEL_RATE_LIMIT",
    "NETWORK_ERROR",
    "TEMPORARY_PROVIDER_ERROR",
    "JOB_TIMEOUT",
    "VALIDATION_FAILED",
    "VALIDATION_UNPARSEABLE",
    "INTERNAL_ERROR",
]
NOT_RETRYABLE = [
    "INVALID_SNAPSHOT",
    "INVALID_SCHEMA",
    "INVALID_CREDENTIAL",
    "CREDENTIAL_NOT_FOUND",
    "CONTENT_SAFETY_BLOCKED",
    "CANCELLED",
    "MODEL_CONTEXT_LENGTH_EXCEEDED",
    "MODEL_OUTPUT_TRUNCATED",
    "MODEL_NOT_FOUND",
    "MODEL_BAD_REQUEST",
    "MODEL_INSUFFICIENT_BALANCE",
]


@pytest.mark.parametrize("code", RETRYABLE)
def test_retryable(code: str) -> None:
    assert is_retryable(code)


@pytest.mark.parametrize("code", NOT_RETRYABLE)
def test_not_retryable(code: str) -> None:
    assert not is_retryable(code)


def test_internal_errors_are_retried_once() -> None:
    assert spec_of(ErrorCode.INTERNAL_ERROR).max_attempts == 2


def test_unknown_code_is_refused() -> None:
    with pytest.raises(ValueError):
        spec_of("NOT_A_CODE")


DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_documented_error_table_is_the_catalogue() -> None:
    table = (DOCS / "error-codes.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| MODEL_TIMEOUT"))
    retryable, not_retryable = (
        {code.split(" ")[0] for code in cell.strip().split(", ")}
        for cell in row.strip("|").split("|")
    )
    assert retryable | not_retryable == {code.value for code in EXECUTION_CODES}
    assert all(is_retryable(code) for code in retryable)
    assert not any(is_retryable(code) for code in not_retryable)


def test_every_code_the_model_error_table_names_exists() -> None:
    text = (DOCS / "how-it-works.md").read_text()
    table = text[text.index("| model error | code | retried |") :].split("\n\n")[0]
    named = {name for name in re.findall(r"\b[A-Z][A-Z_]{5,}\b", table) if "AIJOB" not in name}
    assert named
    assert named <= {code.value for code in EXECUTION_CODES}

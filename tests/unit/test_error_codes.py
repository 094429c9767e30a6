"""The error catalogue's retryable flags (docs/architecture.md, *Retries and the error
catalogue*)."""

from __future__ import annotations

import pytest

from shared.error_codes import ErrorCode, is_retryable, spec_of

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

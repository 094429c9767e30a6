"""How a job attempt fails, in the terms of the error catalogue, and the mapping from openai
SDK exceptions to it. The runtime never retries by itself: the scheduler decides."""

from __future__ import annotations

import math

import openai

from shared.error_codes import ErrorCode, is_retryable

__all__ = ["JobFailure", "failure_from_openai"]


class JobFailure(Exception):
    """An attempt failed; reported to the scheduler with SubmitFailure."""

    def __init__(
        self,
        code: ErrorCode,
        public_message: str,
        internal_message: str = "",
        *,
        retry_after_ms: int = 0,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(f"{code}: {public_message}")
        self.code = code
        self.public_message = public_message
        self.internal_message = internal_message
        self.retry_after_ms = retry_after_ms
        self.retryable = is_retryable(code) if retryable is None else retryable


#: A provider's Retry-After longer than this is read as this (the scheduler caps it too).
MAX_RETRY_AFTER_MS = 600_000


def _retry_after_ms(error: openai.APIStatusError) -> int:
    return retry_after_ms(error.response.headers.get("retry-after", ""))


def retry_after_ms(value: str) -> int:
    """Milliseconds a Retry-After header asks for: 0 when absent or unreadable (a date, NaN),
    capped at MAX_RETRY_AFTER_MS (``1e9`` or ``inf`` must not park a job for ever)."""
    try:
        seconds = float(value)
    except ValueError:
        return 0
    if math.isnan(seconds) or seconds <= 0:
        return 0
    return round(min(seconds * 1000, MAX_RETRY_AFTER_MS))


def failure_from_openai(error: openai.OpenAIError) -> JobFailure:  # noqa: PLR0911 - one case a line
    """The catalogue entry for an SDK error. Messages name the kind of failure, never content."""
    if isinstance(error, openai.APITimeoutError):
        return JobFailure(
            ErrorCode.MODEL_TIMEOUT, "The model did not answer in time.", "request timed out"
        )
    if isinstance(error, openai.APIConnectionError):
        return JobFailure(
            ErrorCode.NETWORK_ERROR, "The model could not be reached.", type(error).__name__
        )
    if isinstance(error, openai.RateLimitError):
        return JobFailure(
            ErrorCode.MODEL_RATE_LIMIT,
            "The model provider is rate limiting requests.",
            "HTTP 429",
            retry_after_ms=_retry_after_ms(error),
        )
    if isinstance(error, openai.AuthenticationError | openai.PermissionDeniedError):
        return JobFailure(
            ErrorCode.INVALID_CREDENTIAL,
            "The model API key was refused.",
            f"HTTP {error.status_code}",
        )
    if isinstance(error, openai.BadRequestError) and "context" in str(error.body or "").lower():
        return JobFailure(
            ErrorCode.MODEL_CONTEXT_LENGTH_EXCEEDED,
            "The input is too long for the model.",
            "HTTP 400 context length",
        )
    if isinstance(error, openai.APIStatusError) and error.status_code >= 500:
        return JobFailure(
            ErrorCode.TEMPORARY_PROVIDER_ERROR,
            "The model provider had a temporary error.",
            f"HTTP {error.status_code}",
        )
    if isinstance(error, openai.APIStatusError):
        return JobFailure(
            ErrorCode.INVALID_SCHEMA,
            "The model provider refused the request.",
            f"HTTP {error.status_code}",
        )
    return JobFailure(ErrorCode.INTERNAL_ERROR, "The model call failed.", type(error).__name__)

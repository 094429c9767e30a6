"""How a job attempt fails, in the terms of the error catalogue, and the mapping from openai
SDK exceptions to it. The runtime never retries by itself: the scheduler decides."""

from __future__ import annotations

import math
import re

import openai

from shared.error_codes import ErrorCode, is_retryable

__all__ = ["JobFailure", "failure_from_openai", "failure_in_body"]


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


#: Provider error codes and message fragments that mean the prompt is longer than the model's
#: context (OpenAI's ``context_length_exceeded``, DeepSeek's and vLLM's wording).
_CONTEXT_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})
_CONTEXT_MESSAGES = re.compile(
    r"maximum context length|context length exceeded|context_length_exceeded"
    r"|exceeds the (?:model's )?context|prompt is too long|too many tokens in the prompt",
    re.IGNORECASE,
)
#: How much of a provider's error message is kept (in the internal message only).
PROVIDER_MESSAGE_CHARS = 300


def provider_message(error: openai.APIStatusError) -> str:
    """The provider's own error message, trimmed to one line: what operators need to tell an
    unsupported parameter from a wrong base URL. Never the request (the SDK's body is the
    provider's answer, not the prompt)."""
    body = error.body
    message: object = None
    if isinstance(body, dict):
        message = body.get("message", body.get("error"))
        if isinstance(message, dict):
            message = message.get("message")
    text = " ".join(str(message or error.message or "").split())
    return text[:PROVIDER_MESSAGE_CHARS]


def provider_code(error: openai.APIStatusError) -> str:
    code = getattr(error, "code", None)
    body = error.body
    if code is None and isinstance(body, dict):
        code = body.get("code")
    return str(code or "")


def is_context_length(error: openai.APIStatusError) -> bool:
    """Whether the provider says the prompt does not fit the model's context: by its error code
    or its known messages, never because some word appears in any 400."""
    if error.status_code == 413 or provider_code(error) in _CONTEXT_CODES:
        return True
    return error.status_code == 400 and bool(_CONTEXT_MESSAGES.search(provider_message(error)))


def failure_in_body(body: object) -> JobFailure:
    """A 200 whose body is an error, not a completion: what an overloaded provider that held the
    request open (status already sent) answers when it gives up on it."""
    message = ""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = str(body["error"].get("message", ""))
    text = " ".join(message.split())[:PROVIDER_MESSAGE_CHARS]
    return JobFailure(
        ErrorCode.TEMPORARY_PROVIDER_ERROR,
        "The model provider had a temporary error.",
        f"HTTP 200 with an error: {text}".rstrip(": "),
    )


def failure_from_openai(error: openai.OpenAIError) -> JobFailure:
    """The catalogue entry for an SDK error. Public messages name the kind of failure; the
    internal message adds the HTTP status and the provider's trimmed message, never content."""
    if isinstance(error, openai.APITimeoutError):
        return JobFailure(
            ErrorCode.MODEL_TIMEOUT, "The model did not answer in time.", "request timed out"
        )
    if isinstance(error, openai.APIConnectionError):
        return JobFailure(
            ErrorCode.NETWORK_ERROR, "The model could not be reached.", type(error).__name__
        )
    if isinstance(error, openai.APIStatusError):
        return _status_failure(error)
    if type(error) is openai.APIError:
        # An error event inside a 200 stream: a provider that held the request open gave up.
        body = error.body if isinstance(error.body, dict) else {"message": error.message}
        return failure_in_body({"error": body})
    return JobFailure(ErrorCode.INTERNAL_ERROR, "The model call failed.", type(error).__name__)


#: Status code -> (catalogue code, public message), for the statuses with a meaning of their own.
_BY_STATUS: dict[int, tuple[ErrorCode, str]] = {
    401: (ErrorCode.INVALID_CREDENTIAL, "The model API key was refused."),
    402: (ErrorCode.MODEL_INSUFFICIENT_BALANCE, "The model account has no balance left."),
    403: (ErrorCode.INVALID_CREDENTIAL, "The model API key was refused."),
    404: (ErrorCode.MODEL_NOT_FOUND, "The model or its endpoint was not found."),
    408: (ErrorCode.MODEL_TIMEOUT, "The model did not answer in time."),
    429: (ErrorCode.MODEL_RATE_LIMIT, "The model provider is rate limiting requests."),
}


def _status_failure(error: openai.APIStatusError) -> JobFailure:
    status = error.status_code
    internal = f"HTTP {status}: {provider_message(error)}".rstrip(": ")
    if is_context_length(error):
        return JobFailure(
            ErrorCode.MODEL_CONTEXT_LENGTH_EXCEEDED,
            "The input is too long for the model.",
            internal,
        )
    if status in _BY_STATUS:
        code, public = _BY_STATUS[status]
        retry_after = _retry_after_ms(error) if code is ErrorCode.MODEL_RATE_LIMIT else 0
        return JobFailure(code, public, internal, retry_after_ms=retry_after)
    if status >= 500:
        return JobFailure(
            ErrorCode.TEMPORARY_PROVIDER_ERROR,
            "The model provider had a temporary error.",
            internal,
            retry_after_ms=_retry_after_ms(error),
        )
    return JobFailure(
        ErrorCode.MODEL_BAD_REQUEST, "The model provider refused the request.", internal
    )

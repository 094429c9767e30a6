"""Provider input is untrusted: a provider's error message quoting the
request stored the user's API key in ``internalErrorMessage``; a params key appeared in a
CreateJob span's exception event."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from scheduler_service.core.errors import InvalidRequestError
from scheduler_service.services import judging
from scheduler_service.services.reports import FailureReport
from shared import tracing
from shared.error_codes import ErrorCode
from shared.redaction import REDACTED, scrub_secrets

KEY = "sk-5f0c2a9d8e7b4c1a9f3e6d2b7a8c4e1f"


@pytest.mark.parametrize(
    "message",
    [
        f"Incorrect API key provided: {KEY}. You can find your API key at ...",
        f'{{"headers": {{"Authorization": "Bearer {KEY}"}}}}',
        f"request failed: api_key={KEY}&model=deepseek-chat",
        f"echo of your request: {{'api-key': '{KEY}'}}",
    ],
)
def test_credentials_in_provider_text_are_scrubbed(message: str) -> None:
    scrubbed = scrub_secrets(message)
    assert KEY not in scrubbed and REDACTED in scrubbed


@given(st.text(alphabet=st.characters(codec="ascii"), min_size=8, max_size=40))
def test_a_known_secret_never_survives_whatever_it_looks_like(secret: str) -> None:
    assert secret not in scrub_secrets(f"the provider said: <{secret}> was refused", [secret])


def test_ordinary_text_is_left_alone() -> None:
    text = "The model answered 429: too many requests; retry after 2s (request id abc-123)."
    assert scrub_secrets(text) == text


def test_the_scheduler_stores_a_failure_report_scrubbed() -> None:
    report = FailureReport(
        job_id="01J0000000000000000000000A",
        attempt_no=1,
        runtime_instance_id="rt-1",
        error_code=ErrorCode.INVALID_CREDENTIAL.value,
        retryable=False,
        public_message="The key was refused.",
        internal_message=f"401 from the provider: Incorrect API key provided: {KEY}",
        retry_after_ms=0,
        usage=None,
    )
    error = judging.failure_error(report)
    assert error.internal_message is not None and KEY not in error.internal_message


def test_a_span_records_the_error_type_and_code_never_its_text() -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracing.use_provider(provider)
    try:
        with pytest.raises(InvalidRequestError), tracing.span("aijob.CreateJob"):
            raise InvalidRequestError("params.secretProjectName: extra inputs are not permitted")
    finally:
        tracing.use_provider(None)
    (span,) = memory.get_finished_spans()
    assert not span.events
    assert span.attributes is not None
    assert span.attributes["error.type"] == "InvalidRequestError"
    assert span.attributes["aijob.error_code"] == "INVALID_ARGUMENT"
    assert "secretProjectName" not in str(span.status.description)

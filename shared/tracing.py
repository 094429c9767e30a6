"""Traces across the pair: W3C trace context from the caller, kept with the job, carried on the
lease, continued by the runtime — so CreateJob, the lease, the model call and the result are one
trace.

Off by default. The standard OpenTelemetry variables turn it on: ``OTEL_TRACES_EXPORTER=otlp``
(or ``console``), or an ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``;
``OTEL_SDK_DISABLED=true`` keeps it off whatever else is set; the exporter, sampler and batch
settings are the SDK's own ``OTEL_*`` variables. Spans carry ids, types, counts and timings —
never snapshots, outputs, prompts, keys or tokens.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = [
    "context_of",
    "current_traceparent",
    "enabled",
    "finished_span",
    "inject",
    "now_ns",
    "setup_from_env",
    "shutdown",
    "span",
    "use_provider",
]

_PROPAGATOR = TraceContextTextMapPropagator()
#: This process's provider; None: tracing off (every span is a no-op).
_provider: TracerProvider | None = None


def _wanted(env: Mapping[str, str]) -> str | None:
    """The exporter the environment asks for, or None."""
    if env.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return None
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter in {"otlp", "console"}:
        return exporter
    if exporter == "none":
        return None
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return "otlp"
    return None


def setup_from_env(service_name: str, env: Mapping[str, str] | None = None) -> bool:
    """Turn tracing on for this process if the ``OTEL_*`` variables ask for it."""
    env = os.environ if env is None else env
    kind = _wanted(env)
    if kind is None:
        return False
    exporter: SpanExporter
    if kind == "console":
        exporter = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    name = env.get("OTEL_SERVICE_NAME") or service_name
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    use_provider(provider)
    return True


def use_provider(provider: TracerProvider | None) -> None:
    """This process's tracer provider (tests use one with an in-memory exporter)."""
    global _provider  # noqa: PLW0603 - one provider per process, set at start
    _provider = provider


def enabled() -> bool:
    return _provider is not None


def shutdown() -> None:
    """Flush and stop (at process exit)."""
    if _provider is not None:
        _provider.shutdown()


def _tracer() -> trace.Tracer:
    if _provider is None:
        return trace.NoOpTracer()
    return _provider.get_tracer("aijob")


def context_of(traceparent: str | None, tracestate: str | None = None) -> Context | None:
    """The trace context a W3C ``traceparent`` names (None when absent or malformed)."""
    if not traceparent:
        return None
    carrier = {"traceparent": traceparent}
    if tracestate:
        carrier["tracestate"] = tracestate
    context = _PROPAGATOR.extract(carrier)
    if not trace.get_current_span(context).get_span_context().is_valid:
        return None
    return context


def inject(span_to_carry: Span) -> str:
    """The W3C ``traceparent`` of ``span_to_carry`` ("" when it is not recording)."""
    if not span_to_carry.get_span_context().is_valid:
        return ""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, trace.set_span_in_context(span_to_carry))
    return carrier.get("traceparent", "")


def current_traceparent() -> str:
    return inject(trace.get_current_span())


def now_ns() -> int:
    """A span's timestamp: wall-clock nanoseconds since the epoch, as OTLP wants them (nothing in
    the engine reads them back; leases and deadlines use the database clock)."""
    return time.time_ns()


def finished_span(
    name: str,
    *,
    parent: Context | None,
    start_ns: int,
    attributes: Mapping[str, Any] | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
) -> Context:
    """A span that began at ``start_ns`` (:func:`now_ns`) and ends now — for work done in a
    batch, told per job once it committed; the context of the span, for its children."""
    done = _tracer().start_span(
        name, context=parent, kind=kind, attributes=dict(attributes or {}), start_time=start_ns
    )
    done.end()
    return trace.set_span_in_context(done)


@contextlib.contextmanager
def span(
    name: str,
    *,
    parent: Context | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[Span]:
    """A span named ``name``, child of ``parent`` (or of the current span).

    An exception marks the span as an error with its type and catalogue code only: its text may
    quote request content (a params key, a snapshot value), which spans never carry."""
    if _provider is None:
        # Not tracing: the span a no-op tracer would give (it carries the parent's context, so
        # ``inject`` still answers the caller's traceparent), without attaching a context on
        # every CreateJob.
        yield trace.NonRecordingSpan(trace.get_current_span(parent).get_span_context())
        return
    with _tracer().start_as_current_span(
        name,
        context=parent,
        kind=kind,
        attributes=dict(attributes or {}),
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except Exception as exc:
            code = getattr(exc, "code", None)
            current.set_attribute("error.type", type(exc).__name__)
            if isinstance(code, str):
                current.set_attribute("aijob.error_code", code)
            current.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise

"""Traces across the pair: a caller's W3C traceparent starts one trace that holds
CreateJob, the lease, the runtime's attempt and model call (in a separate process, exported over
OTLP to a receiver in this test) and the result's acceptance and projection — with ids, types and
counts in the attributes, never the job's content."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from devtools.harness.runtime_client import JobClient
from devtools.harness.waiting import eventually
from devtools.scripted_model import ScriptedModelServer
from shared import tracing
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from tests.support.db_checks import job_row
from tests.support.runtime_procs import Launcher, status_is
from tests.support.schedulers import RunningScheduler, SchedulerFactory

pytestmark = pytest.mark.mysql

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
CANARY = "CANARY-trace-41c7"


class _Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP trace receiver that keeps what it is sent."""

    def __init__(self) -> None:
        self.spans: list[Any] = []

    async def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                self.spans.extend(scope.spans)
        return trace_service_pb2.ExportTraceServiceResponse()


async def test_one_trace_spans_the_create_the_lease_the_model_call_and_the_result(
    mysql_url: str,
    start_scheduler: SchedulerFactory,
    launch: Launcher,
    model_server: ScriptedModelServer,
) -> None:
    receiver = _Receiver()
    server = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracing.use_provider(provider)
    try:
        scheduler = await start_scheduler(mysql_url)
        launch(
            scheduler,
            "rt-traced",
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
            OTEL_EXPORTER_OTLP_INSECURE="true",
            OTEL_BSP_SCHEDULE_DELAY="50",
        )
        client = JobClient(scheduler.channel, "traced-user")
        request = job_pb.CreateJobRequest(
            job_type="synthetic_echo", snapshot_json=f'{{"text": "{CANARY}"}}'
        )
        traceparent = f"00-{TRACE_ID}-{CALLER_SPAN}-01"
        created = await client.stub.CreateJob(
            request, metadata=(*client.metadata, ("traceparent", traceparent)), timeout=30
        )
        await status_is(scheduler, created.job.job_id, "succeeded")

        def runtime_spans() -> dict[str, Any]:
            return {s.name: s for s in receiver.spans if s.trace_id == bytes.fromhex(TRACE_ID)}

        async def exported() -> bool:
            return {"aijob.attempt", "aijob.model_call"} <= runtime_spans().keys()

        await eventually(exported, within_s=60)
        scheduler_spans = {
            s.name: s
            for s in memory.get_finished_spans()
            if s.context.trace_id == int(TRACE_ID, 16)
        }
    finally:
        tracing.use_provider(None)
        await server.stop(None)
    assert {"aijob.CreateJob", "aijob.lease", "aijob.SubmitResult", "aijob.projection"} <= (
        scheduler_spans.keys()
    )
    create = scheduler_spans["aijob.CreateJob"]
    assert create.parent is not None and create.parent.span_id == int(CALLER_SPAN, 16)
    assert create.attributes is not None
    assert create.attributes["aijob.job_id"] == created.job.job_id
    for name in ("aijob.lease", "aijob.SubmitResult"):
        parent = scheduler_spans[name].parent
        assert parent is not None and parent.span_id == create.context.span_id
    attempt, call = runtime_spans()["aijob.attempt"], runtime_spans()["aijob.model_call"]
    assert attempt.parent_span_id == create.context.span_id.to_bytes(8, "big")
    assert call.parent_span_id == attempt.span_id
    attributes = {a.key: a.value for a in call.attributes}
    assert attributes["gen_ai.usage.output_tokens"].int_value > 0
    # Ids, types and counts: never the job's content.
    every_value = [str(v) for s in scheduler_spans.values() for v in (s.attributes or {}).values()]
    every_value += [str(a.value) for s in runtime_spans().values() for a in s.attributes]
    assert not [v for v in every_value if CANARY in v]


def test_tracing_is_off_unless_the_otel_variables_ask() -> None:
    assert tracing.setup_from_env("x", {}) is False
    assert tracing.setup_from_env("x", {"OTEL_TRACES_EXPORTER": "none"}) is False
    assert (
        tracing.setup_from_env(
            "x", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4317", "OTEL_SDK_DISABLED": "true"}
        )
        is False
    )
    assert tracing.context_of("not-a-traceparent") is None
    assert not tracing.enabled()


async def test_a_scheduler_that_does_not_trace_keeps_the_callers_trace(
    scheduler: RunningScheduler,
) -> None:
    """Tracing off here: the job keeps the caller's traceparent, so a runtime that traces still
    joins the caller's trace; a malformed one is dropped, not stored."""
    client = JobClient(scheduler.channel, "traced-user")
    traceparent = f"00-{TRACE_ID}-{CALLER_SPAN}-01"
    for sent, kept in ((traceparent, traceparent), ("00-garbage", None)):
        created = await client.stub.CreateJob(
            job_pb.CreateJobRequest(job_type="synthetic_echo", snapshot_json="{}"),
            metadata=(*client.metadata, ("traceparent", sent)),
            timeout=30,
        )
        row = await job_row(scheduler.app.engine, created.job.job_id)
        assert row["traceParent"] == kept

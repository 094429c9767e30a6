"""Numbers that come from outside the scheduler (a runtime's chunk offset, the provider's usage
counts, an operator's answer query) answer a public code, never INTERNAL. Real MariaDB, real
gRPC.

A chunk at offset 2**63 - 1 overflowed the BIGINT column; a result whose prompt and completion
tokens (each an int32) reached 2**31 together overflowed the usage ledger's INT, on the stream
and as the unary retry alike, so the job sat ``running`` until its lease expired."""

from __future__ import annotations

import grpc
import pytest
from pydantic import ValidationError
from sqlalchemy import select

from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output
from scheduler_service.core.usage import MAX_CALL_TOKENS
from scheduler_service.wiring.settings import SchedulerSettings
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from tests.protocol.test_stream_output import _leased
from tests.support.db_checks import CHUNKS, USAGE, count, job_row
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql


@pytest.mark.parametrize("offset", [2**63 - 1, 2**64 - 1])
async def test_a_chunk_offset_past_the_stored_text_is_invalid_argument(
    scheduler: RunningScheduler, offset: int
) -> None:
    runtime, lease, _ = await _leased(scheduler)
    ack = await runtime.send_chunk(lease, offset, "x")
    assert ack.status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert await count(scheduler.app.engine, CHUNKS, jobId=lease.job_id) == 0
    await runtime.close()


@pytest.mark.parametrize("on_stream", [True, False], ids=["stream", "unary"])
async def test_usage_counts_past_the_ledger_are_recorded_at_the_bound(
    scheduler: RunningScheduler, on_stream: bool
) -> None:
    await JobClient(scheduler.channel).create()
    runtime = ClientRuntime(scheduler.channel, "rt-usage", slots=1)
    await runtime.connect()
    try:
        lease = await runtime.next_lease()
        request = runtime.result_request(lease, echo_output(lease))
        request.usage.prompt_tokens = 2**31 - 1
        request.usage.completion_tokens = 2**31 - 1
        request.usage.latency_ms = 2**31 - 1
        if on_stream:
            ack = await runtime.report(rt.PollReport(result=request))
            assert (ack.status.code, ack.result.duplicate) == (0, False)
        else:
            reply = await runtime.stub.SubmitResult(request, metadata=runtime.metadata, timeout=30)
            assert reply.duplicate is False
    finally:
        await runtime.close()
    engine = scheduler.app.engine
    assert (await job_row(engine, lease.job_id))["lifecycleStatus"] == "succeeded"
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                select(USAGE.c.promptTokens, USAGE.c.completionTokens, USAGE.c.totalTokens).where(
                    USAGE.c.jobId == lease.job_id
                )
            )
        ).one()
    assert tuple(row) == (MAX_CALL_TOKENS, MAX_CALL_TOKENS, 2 * MAX_CALL_TOKENS)


@pytest.mark.parametrize(
    "query",
    [
        "UPDATE LearnerAnswer SET answer = '' WHERE id = :answer_id",
        "SELECT answer FROM LearnerAnswer WHERE id = :answer_id; DELETE FROM LearnerAnswer",
        "",
    ],
)
def test_an_answer_query_that_is_not_one_select_is_refused_at_start(query: str) -> None:
    with pytest.raises(ValidationError, match="must be one SELECT statement"):
        SchedulerSettings(legacy_answer_query=query)

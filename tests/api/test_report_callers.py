"""Every report is judged as its own caller, whoever else's reports share its batch. Real
MariaDB, real gRPC.

Reports of one batch window are applied together in one task; the check that a token may act
for a report's runtime instance is made where the report is received, in its caller's own task.
Judged in the batch's task instead, two fleets on their own tokens refused each other's
heartbeats and results ("this runtime instance id belongs to another runtime token")."""

from __future__ import annotations

import asyncio

import pytest

from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from tests.support.schedulers import SchedulerFactory

pytestmark = pytest.mark.mysql

FLEETS = {"rt-a-": "token-of-fleet-a", "rt-b-": "token-of-fleet-b"}


def _answers(acks: list[rt.ReportAck]) -> list[tuple[int, str | None]]:
    return [(ack.status.code, ack.WhichOneof("response")) for ack in acks]


def _beat(runtime: ClientRuntime, lease: object) -> rt.PollReport:
    return rt.PollReport(
        heartbeat=rt.HeartbeatRequest(
            job_id=lease.job_id,  # type: ignore[attr-defined]
            attempt_no=lease.attempt_no,  # type: ignore[attr-defined]
            runtime_instance_id=runtime.instance_id,
            progress=40,
            lease_token=lease.lease_token,  # type: ignore[attr-defined]
        )
    )


@pytest.mark.parametrize("bound", [False, True], ids=["unbound-tokens", "bound-tokens"])
async def test_two_tokens_reports_in_one_batch_window_are_each_judged_as_their_own(
    mysql_url: str, start_scheduler: SchedulerFactory, bound: bool
) -> None:
    identities = {"runtime_identities": ",".join(f"{p}={t}" for p, t in FLEETS.items())}
    # A wide window that closes at two reports: the two streams' reports share one batch.
    scheduler = await start_scheduler(
        mysql_url,
        report_batch_window_ms=100,
        report_batch_max=2,
        **(identities if bound else {"runtime_tokens": ",".join(FLEETS.values())}),
    )
    jobs = JobClient(scheduler.channel)
    runtimes = [
        ClientRuntime(scheduler.channel, f"{prefix}1", slots=1, token=token)
        for prefix, token in FLEETS.items()
    ]
    for _ in runtimes:
        await jobs.create()
    for runtime in runtimes:
        await runtime.connect()
    try:
        leases = [await runtime.next_lease() for runtime in runtimes]
        for _ in range(3):
            acks = await asyncio.gather(
                *(r.report(_beat(r, lease)) for r, lease in zip(runtimes, leases, strict=True))
            )
            assert _answers(acks) == [(0, "heartbeat")] * 2
        acks = await asyncio.gather(
            *(
                r.submit_on_stream(lease, echo_output(lease))
                for r, lease in zip(runtimes, leases, strict=True)
            )
        )
        assert _answers(acks) == [(0, "result")] * 2
        assert all(not ack.result.duplicate for ack in acks)
    finally:
        for runtime in runtimes:
            await runtime.close()

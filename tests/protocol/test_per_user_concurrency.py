"""One end user's calls at once on a model key (``ModelLimit.max_concurrency_per_user``):
DeepSeek caps each ``user_id`` on accounts with raised quotas, so dispatch does too — across
runtimes and scheduler replicas, whose claims on a limited key serialise on its row."""

from __future__ import annotations

import json

import pytest

from devtools.harness.runtime_client import JobClient
from scheduler_service.services.reports import ResultSubmission
from shared.canonical_json import output_hash
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc as admin_grpc
from tests.support.schedulers import SchedulerFactory

pytestmark = pytest.mark.mysql

TYPES = ["synthetic_echo"]


async def test_a_users_calls_at_once_stay_within_their_cap_across_replicas(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    first, second = await start_scheduler(mysql_url), await start_scheduler(mysql_url)
    limit = admin_pb.ModelLimit(
        provider="deepseek",
        model="deepseek-v4-flash",
        credential_scope="platform",
        max_concurrency_per_user=2,
    )
    stored = await admin_grpc.AdminServiceStub(first.channel).PutModelLimit(
        admin_pb.PutModelLimitRequest(limit=limit)
    )
    assert stored.limit == limit
    busy = [(await JobClient(first.channel, "busy-user").create()).job_id for _ in range(5)]
    other = (await JobClient(second.channel, "other-user").create()).job_id

    # Four runtimes on two replicas ask for far more than the cap allows.
    claimed = []
    for app, runtime in [(first.app, "rt-1"), (second.app, "rt-2")] * 2:
        claimed += await app.leasing.claim(runtime, TYPES, 10)
    by_user = sorted(lease.job_id for lease in claimed)
    assert by_user == sorted([*busy[:2], other])

    # One of the user's calls ends: one more of theirs may start, on either replica.
    done = next(lease for lease in claimed if lease.job_id == busy[0])
    output = {"echo": {"text": "hello"}}
    await first.app.reports.submit_result(
        ResultSubmission(
            done.job_id,
            done.attempt_no,
            "rt-1",
            output_hash(output),
            json.dumps(output),
            None,
            done.lease_token,
        )
    )
    more = await second.app.leasing.claim("rt-2", TYPES, 10)
    assert [lease.job_id for lease in more] == [busy[2]]
    assert await first.app.leasing.claim("rt-1", TYPES, 10) == []

"""Poison isolation as a property: generated snapshots and params (huge and tiny
numbers, deep and wide values, odd strings) created beside another user's normal jobs, served by
real runtime processes. Every normal job succeeds; every generated one is refused at create with
INVALID_ARGUMENT or ends with a code of the public catalogue; no Poll stream ends."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devtools.harness.runtime_client import JobClient
from devtools.harness.waiting import eventually
from shared.error_codes import ErrorCode
from shared.gen.aijob.v1 import job_service_pb2 as job_pb
from shared.status_details import error_reason
from tests.support.db_checks import job_row
from tests.support.runtime_procs import Launcher
from tests.support.schedulers import RunningScheduler

pytestmark = [pytest.mark.mysql, pytest.mark.slow]

TERMINAL = {"succeeded", "failed", "cancelled"}


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"d": value}
    return value


_numbers = st.one_of(
    st.integers(),
    st.integers(min_value=1, max_value=10**6).map(lambda n: n * 10**400),
    st.integers(min_value=2**53 - 2, max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([5e-324, -0.0, 1.7976931348623157e308]),
)
_strings = st.one_of(st.text(max_size=40), st.sampled_from(["\ud800", "\x00", "\u202e", "'; --"]))
_leaves = st.one_of(st.none(), st.booleans(), _numbers, _strings)
_values = st.one_of(
    st.recursive(
        _leaves,
        lambda inner: st.lists(inner, max_size=6) | st.dictionaries(_strings, inner, max_size=6),
        max_leaves=40,
    ),
    st.integers(min_value=20, max_value=120).map(_nested),
    st.lists(st.integers(), min_size=200, max_size=400),
)


def _document(value: Any) -> str:
    # json.dumps escapes a lone surrogate as \ud800: text the scheduler must refuse itself.
    return json.dumps(value)


async def test_generated_input_never_stops_anyone_else(
    scheduler: RunningScheduler, launch: Launcher, tmp_path: Path
) -> None:
    for name in ("rt-prop-1", "rt-prop-2"):
        launch(scheduler, name)
    normal = JobClient(scheduler.channel, "user-normal")
    generated = JobClient(scheduler.channel, "user-generated")
    normal_ids: list[str] = []
    generated_ids: list[str] = []

    @settings(
        max_examples=30,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(snapshot_value=_values, params_value=_values)
    def create_beside(snapshot_value: Any, params_value: Any) -> None:
        # Hypothesis runs in a thread of its own; each example's calls run on the test's loop.
        asyncio.run_coroutine_threadsafe(create(snapshot_value, params_value), loop).result(60)

    async def create(snapshot_value: Any, params_value: Any) -> None:
        request = job_pb.CreateJobRequest(
            job_type="synthetic_echo",
            snapshot_json=_document({"text": "generated", "value": snapshot_value}),
            params_json=_document({"value": params_value}),
        )
        try:
            reply = await generated.stub.CreateJob(request, metadata=generated.metadata, timeout=30)
        except grpc.aio.AioRpcError as refused:
            assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT, refused
            assert error_reason(refused) in {c.value for c in ErrorCode}
        else:
            generated_ids.append(reply.job.job_id)
        normal_ids.append((await normal.create()).job_id)

    loop = asyncio.get_running_loop()
    await asyncio.to_thread(create_beside)

    async def all_ended() -> bool:
        for job_id in normal_ids + generated_ids:
            if (await job_row(scheduler.app.engine, job_id))["lifecycleStatus"] not in TERMINAL:
                return False
        return True

    await eventually(all_ended, within_s=120)
    for job_id in normal_ids:
        assert (await job_row(scheduler.app.engine, job_id))["lifecycleStatus"] == "succeeded"
    for job_id in generated_ids:
        row = await job_row(scheduler.app.engine, job_id)
        assert row["errorCode"] is None or row["errorCode"] in {c.value for c in ErrorCode}, row
    for name in ("rt-prop-1", "rt-prop-2"):
        log = (tmp_path / f"{name}.log").read_text()
        assert "poll_reconnect" not in log, log[-2000:]

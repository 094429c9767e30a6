"""A Poll stream the scheduler ends leaves nothing running behind it on the runtime's side: the
request generator ends (shared/poll_frames.py, ``end_requests``), so grpc.aio's task that pumps
it finishes, for ``runtime_service`` and the test harness's runtime, with frames and without."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from devtools.harness.runtime_client import ClientRuntime
from devtools.scripted_model import ScriptedModelServer
from runtime_service.settings import RuntimeSettings
from runtime_service.worker import Runtime
from tests.support.request_pumps import request_pumps
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql

#: Long enough for any loaded machine; a pump left waiting never finishes at all.
WITHIN_S = 30


@pytest.mark.parametrize("batch_frames", [True, False], ids=["frames", "messages"])
async def test_a_refused_stream_leaves_no_request_pump_in_the_runtime(
    scheduler: RunningScheduler, model_server: ScriptedModelServer, batch_frames: bool
) -> None:
    runtime = Runtime(
        RuntimeSettings(
            scheduler_addr=scheduler.address,
            runtime_token="not-a-runtime-token",
            runtime_instance_id="rt-refused",
            model_base_url=model_server.base_url,
            stream_batch_frames=batch_frames,
        )
    )
    before = asyncio.all_tasks()
    try:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await runtime._session(asyncio.Event())
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        await asyncio.wait_for(
            asyncio.gather(*request_pumps(asyncio.all_tasks() - before)), WITHIN_S
        )
    finally:
        await runtime.runner.close()
        await runtime._channel.close(None)


@pytest.mark.parametrize("batch_frames", [True, False], ids=["frames", "messages"])
async def test_a_refused_stream_leaves_no_request_pump_in_the_harness_runtime(
    scheduler: RunningScheduler, batch_frames: bool
) -> None:
    runtime = ClientRuntime(
        scheduler.channel, "rt-refused", token="not-a-runtime-token", batch_frames=batch_frames
    )
    before = asyncio.all_tasks()
    await runtime.connect()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await runtime._call.read()
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED

    await runtime.close()

    await asyncio.wait_for(asyncio.gather(*request_pumps(asyncio.all_tasks() - before)), WITHIN_S)

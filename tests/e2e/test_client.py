"""The public Python client (``aijob.client``) against a live scheduler on MariaDB:
the job flow, each error class with its public code, deadlines, the blocking client, and a
call that outlives a scheduler restart."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncGenerator
from typing import Any

import grpc
import pytest

from aijob.client import (
    AdminClient,
    BlockingJobsClient,
    DeadlineExceededError,
    InvalidArgumentError,
    JobsClient,
    NotFoundError,
    PermissionDeniedError,
)
from devtools.harness import tokens
from scheduler_service.api.server import build_server
from scheduler_service.wiring.app import SchedulerApp
from scheduler_service.wiring.settings import SchedulerSettings
from tests.support.schedulers import RunningScheduler

pytestmark = pytest.mark.mysql


def _client(address: str, user: str = "client-user", **options: Any) -> JobsClient:
    return JobsClient(address, token=tokens.SERVICE_TOKEN, user_id=user, **options)


async def test_the_job_flow(scheduler: RunningScheduler) -> None:
    async with _client(scheduler.address) as jobs:
        created = [await jobs.create("synthetic_echo", {"text": f"hi {n}"}) for n in range(3)]
        assert len({job.job_id for job in created}) == 3  # a key made for each create
        again = await jobs.create("synthetic_echo", {"text": "k"}, idempotency_key="same-key")
        assert (
            await jobs.create("synthetic_echo", {"text": "k"}, idempotency_key="same-key")
        ).job_id == again.job_id
        listed = [job.job_id async for job in jobs.list(page_size=2)]
        assert set(listed) == {job.job_id for job in [*created, again]}
        cancelled = await jobs.cancel(created[0].job_id)
        assert cancelled.job.lifecycle_status == "cancelled"
        ended = await jobs.wait(created[0].job_id, timeout_s=10)
        assert ended.lifecycle_status == "cancelled"
    async with AdminClient(scheduler.address, token=tokens.ADMIN_TOKEN) as admin:
        retried = await admin.retry(created[0].job_id)
        assert retried.retried_from_job_id == created[0].job_id
        assert (await admin.stats()).depths


async def test_each_error_carries_its_public_code(scheduler: RunningScheduler) -> None:
    async with _client(scheduler.address) as jobs:
        with pytest.raises(NotFoundError) as missing:
            await jobs.get("no-such-job")
        assert (missing.value.code, missing.value.reason) == (
            grpc.StatusCode.NOT_FOUND,
            "JOB_NOT_FOUND",
        )
        with pytest.raises(InvalidArgumentError) as invalid:
            await jobs.create("no_such_type", {})
        assert invalid.value.metadata.get("field") == "job_type"
        queued = await jobs.create("synthetic_echo", {"text": "waits"})
        with pytest.raises(DeadlineExceededError):
            await jobs.wait(queued.job_id, timeout_s=0.3)  # no runtime: it never ends
    async with JobsClient(scheduler.address, token=tokens.ADMIN_TOKEN, user_id="u") as wrong:
        with pytest.raises(PermissionDeniedError) as refused:
            await wrong.get("x")
        assert refused.value.reason == "PERMISSION_DENIED"


async def test_the_blocking_client(scheduler: RunningScheduler) -> None:
    def use() -> tuple[str, list[str]]:
        with BlockingJobsClient(
            scheduler.address, token=tokens.SERVICE_TOKEN, user_id="blocking-user"
        ) as jobs:
            job = jobs.create("synthetic_echo", {"text": "hi"})
            return job.job_id, [j.job_id for j in jobs.list()]

    job_id, listed = await asyncio.to_thread(use)
    assert listed == [job_id]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _serving(url: str, listen: str) -> AsyncGenerator[None, None]:
    settings = SchedulerSettings(database_url=url, listen=listen, **tokens.SETTINGS)
    app = SchedulerApp.create(settings)
    server, _health, _port = build_server(settings, app)
    await app.start()
    await server.start()
    try:
        yield
    finally:
        await server.stop(None)
        await app.stop()


async def test_a_call_outlives_a_scheduler_restart(mysql_url: str) -> None:
    listen = f"127.0.0.1:{_free_port()}"
    first = _serving(mysql_url, listen)
    await first.__anext__()
    async with _client(listen) as jobs:
        job = await jobs.create("synthetic_echo", {"text": "survives"})
        await first.aclose()  # the scheduler goes away
        call = asyncio.ensure_future(jobs.get(job.job_id))  # retried while it is away
        second = _serving(mysql_url, listen)
        await second.__anext__()
        try:
            assert (await call).job_id == job.job_id
        finally:
            await second.aclose()

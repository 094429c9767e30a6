"""DeepSeek as it limits today, with the real scheduler, runtimes and the scripted
model behaving like DeepSeek: every call carries the job's user as a stable pseudonym (never the
raw id), a malformed ``user_id`` is refused, and two platform API keys of one account share the
account's concurrency."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from devtools.harness import tokens
from devtools.harness.runtime_client import ClientRuntime, JobClient
from devtools.harness.waiting import eventually
from devtools.scripted_model import AccountLimits, ScriptedModelServer
from scheduler_service.core.provider_ids import ProviderUserIds
from shared.gen.aijob.v1 import admin_service_pb2 as admin_pb
from shared.gen.aijob.v1 import admin_service_pb2_grpc as admin_grpc
from tests.runtime.conftest import RuntimeFactory
from tests.support.db_checks import job_row
from tests.support.fakes import running_model_server
from tests.support.schedulers import RunningScheduler, SchedulerFactory

PSEUDONYMS = ProviderUserIds(tokens.SETTINGS["provider_user_id_key"].encode())


def _stats(server: ScriptedModelServer) -> dict[str, Any]:
    with urllib.request.urlopen(f"{server.base_url.removesuffix('/v1')}/control/stats") as reply:
        return dict(json.load(reply))


async def _run(scheduler: RunningScheduler, jobs: list[tuple[str, str]]) -> None:
    created = [
        (await JobClient(scheduler.channel, user).create(job_type)).job_id
        for user, job_type in jobs
    ]

    async def done() -> bool:
        rows = [await job_row(scheduler.app.engine, job_id) for job_id in created]
        return all(row["lifecycleStatus"] == "succeeded" for row in rows)

    await eventually(done)


@pytest.mark.mysql
async def test_every_call_carries_its_users_pseudonym_and_never_the_raw_id(
    scheduler: RunningScheduler, runtimes: RuntimeFactory, model_server: ScriptedModelServer
) -> None:
    runtimes("rt-a")
    runtimes("rt-b")
    await _run(scheduler, [("user-a", "synthetic_echo")] * 4 + [("user-b", "synthetic_echo")] * 2)
    seen = _stats(model_server)["user_ids"]
    assert seen == {PSEUDONYMS.of("user-a"): 4, PSEUDONYMS.of("user-b"): 2}
    assert not {"user-a", "user-b"} & set(seen)
    assert all(len(user_id) == 43 for user_id in seen)


@pytest.mark.mysql
async def test_a_runtime_told_off_sends_no_user_id(
    scheduler: RunningScheduler, runtimes: RuntimeFactory, model_server: ScriptedModelServer
) -> None:
    runtimes("rt-quiet", provider_user_id="off")
    await _run(scheduler, [("user-a", "synthetic_echo")])
    assert _stats(model_server)["user_ids"] == {}


@pytest.fixture
def account_server() -> Iterator[ScriptedModelServer]:
    """One account of two calls at once, whatever the API key, each call taking 300 ms."""
    with running_model_server(fault="latency:300", account=AccountLimits(concurrency=2)) as server:
        yield server


@pytest.mark.mysql
async def test_two_platform_keys_of_one_account_share_its_concurrency(
    scheduler: RunningScheduler, runtimes: RuntimeFactory, account_server: ScriptedModelServer
) -> None:
    limit = admin_pb.ModelLimit(
        provider="deepseek",
        model="deepseek-v4-flash",
        credential_scope="platform",
        max_concurrency=2,
    )
    stored = await admin_grpc.AdminServiceStub(scheduler.channel).PutModelLimit(
        admin_pb.PutModelLimitRequest(limit=limit)
    )
    assert stored.limit == limit
    for name, key in (("rt-key-1", "sk-account-one-aaaa"), ("rt-key-2", "sk-account-one-bbbb")):
        runtimes(name, model_base_url=account_server.base_url, deepseek_api_key=key)
    # deepseek-chat is V4 Flash by another name: its calls count on the same key.
    jobs = [(f"user-{i}", "synthetic_echo") for i in range(8)]
    created = [
        (
            await JobClient(scheduler.channel, user).create(
                job_type, model="deepseek-chat" if i % 2 else ""
            )
        ).job_id
        for i, (user, job_type) in enumerate(jobs)
    ]

    async def done() -> bool:
        rows = [await job_row(scheduler.app.engine, job_id) for job_id in created]
        return all(row["lifecycleStatus"] == "succeeded" for row in rows)

    await eventually(done)
    stats = _stats(account_server)
    assert stats["rate_limited"] == 0
    assert stats["max_account_concurrent"] <= 2
    assert len(stats["keys"]) == 2  # both keys were used


def test_the_scripted_model_refuses_a_malformed_user_id() -> None:
    with running_model_server() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test-key-0000", max_retries=0)
        for bad in ("has space", "ü", "x" * 513):
            with pytest.raises(openai.BadRequestError):
                client.chat.completions.create(
                    model="deepseek-v4-flash",
                    messages=[{"role": "user", "content": "hi"}],
                    extra_body={"user_id": bad},
                )
        client.chat.completions.create(
            model="deepseek-v4-flash",
            messages=[{"role": "user", "content": "hi"}],
            extra_body={"user_id": "ok_user-1"},
        )
        stats = _stats(server)
        assert (stats["bad_user_id"], stats["user_ids"]) == (3, {"ok_user-1": 1})


@pytest.mark.mysql
async def test_with_no_key_set_every_replica_pseudonymises_under_one_key_the_database_keeps(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    """A deployment that forgot AIJOB_PROVIDER_USER_ID_KEY still isolates its users at the
    provider: the first replica makes a key and keeps it in the database, the others read it."""
    replicas = [await start_scheduler(mysql_url, provider_user_id_key="") for _ in range(2)]
    names = []
    for index, replica in enumerate(replicas):
        await JobClient(replica.channel, "user-a").create()
        runtime = ClientRuntime(replica.channel, f"rt-{index}", slots=1)
        await runtime.connect()
        try:
            names.append((await runtime.next_lease()).provider_user_id)
        finally:
            await runtime.close()
    assert len(names[0]) == 43 and names[0] == names[1]
    assert names[0] != PSEUDONYMS.of("user-a")  # not the configured test key's
    # Turned off, no user id goes out, stored key or not.
    quiet = await start_scheduler(mysql_url, provider_user_id_key="", provider_user_id="off")
    await JobClient(quiet.channel, "user-a").create()
    runtime = ClientRuntime(quiet.channel, "rt-quiet", slots=1)
    await runtime.connect()
    try:
        assert (await runtime.next_lease()).provider_user_id == ""
    finally:
        await runtime.close()

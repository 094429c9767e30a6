"""Rights bound to tokens, and strikes that heal. Real MariaDB, real
gRPC.

- A runtime with as many strikes (leases reaped unreported) as slots got nothing for good: an
  idle live one 0 of 12 jobs, one restarted under its id 0 of 5.
- Any runtime token could pose as another runtime's instance id (and strike it).
- A token not bound to the user-key fleet got user-key leases and the user's key by naming an
  instance id with the fleet's prefix.
"""

from __future__ import annotations

import base64
import os
from typing import Any

import grpc
import pytest
from sqlalchemy import update

from devtools.harness.runtime_client import ClientRuntime, JobClient, echo_output
from devtools.harness.waiting import eventually
from scheduler_service.sql.db.clock import db_now
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.status_details import error_reason
from tests.support.db_checks import JOBS, job_row
from tests.support.schedulers import RunningScheduler, SchedulerFactory

pytestmark = pytest.mark.mysql

FLEET_TOKEN, OTHER_TOKEN = "token-user-key-fleet", "token-plain-runtimes"


async def _expire_leases_of(scheduler: RunningScheduler, holder: str) -> int:
    async with scheduler.app.engine.begin() as conn:
        await conn.execute(
            update(JOBS)
            .where(JOBS.c.lockedBy == holder)
            .values(lockUntil=db_now(-3_600_000), startedAt=db_now(-3_600_000))
        )
    return await scheduler.app.reaper.reap_once()


async def test_a_runtime_restarted_under_its_id_after_a_crash_gets_work_at_once(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, reaper_interval_s=3600)
    jobs = JobClient(scheduler.channel)
    for _ in range(3):
        await jobs.create()
    crashed = ClientRuntime(scheduler.channel, "rt-phoenix", slots=2)
    await crashed.connect()
    for _ in range(2):
        await crashed.next_lease()
    await crashed.close()  # it died holding both
    assert await _expire_leases_of(scheduler, "rt-phoenix") == 2
    restarted = ClientRuntime(scheduler.channel, "rt-phoenix", slots=2)
    await restarted.connect()
    try:
        # Three jobs queued (the two reaped and the third): the fresh stream gets two at once.
        assert len({(await restarted.next_lease()).job_id for _ in range(2)}) == 2
    finally:
        await restarted.close()


async def test_an_idle_struck_runtime_still_gets_work_and_its_slots_heal(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    # Leases of a second and no grace: a strike heals after 2 s without another.
    scheduler = await start_scheduler(
        mysql_url, reaper_interval_s=3600, lease_ttl_s=1, lease_grace_s=0
    )
    jobs = JobClient(scheduler.channel)
    for _ in range(2):
        await jobs.create()
    runtime = ClientRuntime(scheduler.channel, "rt-struck", slots=2)
    await runtime.connect()
    try:
        taken = [await runtime.next_lease() for _ in range(2)]
        (session,) = scheduler.app.dispatcher.sessions()
        assert await _expire_leases_of(scheduler, "rt-struck") == 2
        assert session.slots == 1
        # Its late reports are refused as lost leases; it hands the slots back as credits.
        for lease in taken:
            ack = await runtime.submit_on_stream(lease, echo_output(lease))
            assert ack.status.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
        runtime.credit(2)
        leased = (await runtime.next_lease()).job_id
        assert leased in {lease.job_id for lease in taken}

        async def healed() -> bool:
            return session.slots == 2

        await eventually(healed)
        assert (await runtime.next_lease()).job_id in {lease.job_id for lease in taken}
    finally:
        await runtime.close()


async def _refusal(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value.code(), error_reason(caught.value)


async def test_an_instance_id_belongs_to_the_token_that_subscribed_it(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url, runtime_tokens=f"{FLEET_TOKEN},{OTHER_TOKEN}")
    owner = ClientRuntime(scheduler.channel, "rt-owned", slots=1, token=FLEET_TOKEN)
    await owner.connect()
    job = await JobClient(scheduler.channel).create()
    try:
        assert (await owner.next_lease()).job_id == job.job_id
        impostor = ClientRuntime(scheduler.channel, "rt-owned", slots=1, token=OTHER_TOKEN)
        await impostor.connect()
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await impostor.stream_end()
        assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
        await impostor.close()
        lock = impostor.stub.Lock(
            rt.LockRequest(job_id=job.job_id, runtime_instance_id="rt-owned"),
            metadata=impostor.metadata,
        )
        assert await _refusal(lock) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
        # The impostor's attempts cost the owner nothing: its one slot is intact.
        (session,) = scheduler.app.dispatcher.sessions()
        assert session.slots == 1
    finally:
        await owner.close()
    # The owner's token comes back under the same id after a restart.
    again = ClientRuntime(scheduler.channel, "rt-owned", slots=1, token=FLEET_TOKEN)
    await again.connect()
    await JobClient(scheduler.channel).create()
    try:
        await again.next_lease()
    finally:
        await again.close()


async def test_user_keys_only_for_tokens_bound_to_the_fleet_not_for_its_names(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(
        mysql_url,
        runtime_tokens=OTHER_TOKEN,
        runtime_identities=f"rt-keys-={FLEET_TOKEN}",
        user_key_runtimes="rt-keys-",
        credential_key=base64.b64encode(os.urandom(32)).decode(),
    )
    credential_id = await scheduler.app.credentials.store("user-k", "sk-user-secret-key")
    keyed = await JobClient(scheduler.channel, "user-k").create(
        credential_mode="user_deepseek_key", credential_id=credential_id
    )
    plain = await JobClient(scheduler.channel, "user-p").create()
    spoof = ClientRuntime(scheduler.channel, "rt-keys-spoof", slots=2, token=OTHER_TOKEN)
    await spoof.connect()
    try:
        assert (await spoof.next_lease()).job_id == plain.job_id
        lock = spoof.stub.Lock(
            rt.LockRequest(job_id=keyed.job_id, runtime_instance_id="rt-keys-spoof"),
            metadata=spoof.metadata,
        )
        assert await _refusal(lock) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
        assert (await job_row(scheduler.app.engine, keyed.job_id))["lifecycleStatus"] == "queued"
    finally:
        await spoof.close()
    fleet = ClientRuntime(scheduler.channel, "rt-keys-1", slots=1, token=FLEET_TOKEN)
    await fleet.connect()
    try:
        lease = await fleet.next_lease()
        assert lease.job_id == keyed.job_id
        # Even with the lease's own token, the plain token may not read the key.
        request = rt.ResolveCredentialRequest(
            job_id=lease.job_id,
            attempt_no=lease.attempt_no,
            runtime_instance_id="rt-keys-1",
            lease_token=lease.lease_token,
        )
        refused = spoof.stub.ResolveCredential(request, metadata=spoof.metadata)
        assert (await _refusal(refused))[0] is grpc.StatusCode.PERMISSION_DENIED
        reply = await fleet.stub.ResolveCredential(request, metadata=fleet.metadata)
        assert reply.api_key == "sk-user-secret-key"
    finally:
        await fleet.close()


async def test_a_second_stream_under_a_frozen_runtimes_id_does_not_keep_its_leases_alive(
    scheduler: RunningScheduler,
) -> None:
    """A stream naming a frozen runtime's instance id kept the frozen
    one's leases alive until their jobs timed out."""
    frozen = ClientRuntime(scheduler.channel, "rt-frozen", slots=1)
    lively = ClientRuntime(scheduler.channel, "rt-lively", slots=1)
    for runtime in (frozen, lively):
        await runtime.connect()

    async def both_subscribed() -> bool:
        return {"rt-frozen", "rt-lively"} <= set(scheduler.app.dispatcher.subscribed())

    await eventually(both_subscribed)
    keeper = scheduler.app.keeper
    assert {"rt-frozen", "rt-lively"} <= keeper.alive_holders()
    (session,) = [
        s for s in scheduler.app.dispatcher.sessions() if s.runtime_instance_id == "rt-frozen"
    ]
    session.last_seen -= 3600  # it has said nothing for an hour
    second = ClientRuntime(scheduler.channel, "rt-frozen", slots=1)
    await second.connect()

    async def second_subscribed() -> bool:
        return scheduler.app.dispatcher.subscribed().count("rt-frozen") == 2

    try:
        await eventually(second_subscribed)
        assert "rt-frozen" not in keeper.alive_holders()
        assert "rt-lively" in keeper.alive_holders()
    finally:
        for runtime in (frozen, lively, second):
            await runtime.close()

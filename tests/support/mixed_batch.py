"""A batch that group commit must judge report by report, for any unit of work: a good
result, its duplicate, a stale attempt, a wrong hash and a result for another runtime's lease,
in one batch."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from scheduler_service.core.commands import CreateJobCommand
from scheduler_service.core.errors import InvalidRequestError, LeaseLostError
from scheduler_service.core.records import HeartbeatOutcome, LeasePayload
from scheduler_service.services.group_commit import GroupCommit
from scheduler_service.services.jobs import JobService
from scheduler_service.services.reports import (
    FailureReport,
    HeartbeatReport,
    ResultSubmission,
    SubmitOutcome,
)
from scheduler_service.services.runtime_pieces import RuntimePieces
from shared.canonical_json import output_hash

OUTPUT = {"echo": {"text": "hello"}}

__all__ = ["run_mixed_batch"]


def _result(
    lease: LeasePayload, holder: str, output: Any = OUTPUT, digest: str = ""
) -> ResultSubmission:
    return ResultSubmission(
        lease.job_id,
        lease.attempt_no,
        holder,
        digest or output_hash(output),
        json.dumps(output),
        None,
        lease.lease_token,
    )


async def run_mixed_batch(
    jobs: JobService,
    protocol: RuntimePieces,
    group: GroupCommit,
    advance_past_backoff: Callable[[str], Coroutine[Any, Any, None]],
) -> dict[str, Any]:
    """Runs the batch; returns the leases by role so the caller can check what was written."""

    async def leased(holder: str) -> LeasePayload:
        await jobs.create(
            CreateJobCommand(
                user_id="user-1", job_type="synthetic_echo", snapshot={"text": "hello"}, params={}
            )
        )
        (lease,) = await protocol.leasing.claim(holder, ["synthetic_echo"], 1)
        return lease

    good = await leased("rt-1")
    stale_first = await leased("rt-1")
    await protocol.reports.submit_failure(
        FailureReport(
            stale_first.job_id,
            1,
            "rt-1",
            "MODEL_TIMEOUT",
            True,
            "",
            "",
            0,
            None,
            stale_first.lease_token,
        )
    )
    await advance_past_backoff(stale_first.job_id)
    (stale_now,) = await protocol.leasing.claim("rt-1", ["synthetic_echo"], 1)
    assert (stale_now.job_id, stale_now.attempt_no) == (stale_first.job_id, 2)
    hashed = await leased("rt-1")
    other = await leased("rt-2")
    beat = await leased("rt-1")

    answers = await group.apply(
        [
            _result(good, "rt-1"),
            _result(good, "rt-1"),
            _result(stale_first, "rt-1"),
            _result(hashed, "rt-1", digest="0" * 64),
            _result(other, "rt-1"),
            HeartbeatReport(beat.job_id, 1, "rt-1", 40, beat.lease_token),
        ]
    )
    first, duplicate, stale, wrong_hash, not_holder, heartbeat = answers
    assert isinstance(first, SubmitOutcome) and not first.duplicate
    assert isinstance(duplicate, SubmitOutcome) and duplicate.duplicate
    assert duplicate.result_idempotency_key == first.result_idempotency_key
    assert isinstance(stale, LeaseLostError)
    assert isinstance(wrong_hash, InvalidRequestError) and wrong_hash.field == "output_hash"
    assert isinstance(not_holder, LeaseLostError)
    assert isinstance(heartbeat, HeartbeatOutcome) and not heartbeat.cancel_requested
    return {"good": good, "stale": stale_now, "hashed": hashed, "other": other, "beat": beat}

"""Streaming and resume on retry: a lease of a type that streams its answer says so,
and a later attempt of one gets the text the attempt before it wrote, to continue rather than
start over."""

from __future__ import annotations

from dataclasses import replace

from scheduler_service.core.job_registry import JobRegistry
from scheduler_service.core.output_records import resumable
from scheduler_service.core.records import LeasePayload
from scheduler_service.ports import Transaction

__all__ = ["resuming"]


async def resuming(
    tx: Transaction, registry: JobRegistry, leases: list[LeasePayload]
) -> list[LeasePayload]:
    """``leases``, those of types that stream marked so, and their later attempts with the text
    to continue from: what the latest earlier attempt wrote, unless it ended for its text's sake.
    A read only when such a later attempt is among them (a first attempt never has one)."""
    streaming = {lease.job_id for lease in leases if registry.streams_output(lease.job_type)}
    if not streaming:
        return leases
    later = {lease.job_id for lease in leases if lease.job_id in streaming and lease.attempt_no > 1}
    earlier = await tx.outputs.earlier_text(later) if later else {}
    marked: list[LeasePayload] = []
    for lease in leases:
        if lease.job_id not in streaming:
            marked.append(lease)
            continue
        error_code, text = earlier.get(lease.job_id, (None, ""))
        resume = text if text and resumable(error_code) else ""
        marked.append(replace(lease, stream_output=True, resume_output=resume))
    return marked

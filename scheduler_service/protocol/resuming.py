"""Resume on retry (issue 31): a later attempt of a type that resumes gets the text the attempt
before it wrote, to continue rather than start over."""

from __future__ import annotations

from dataclasses import replace

from scheduler_service.lifecycle.records import LeasePayload
from scheduler_service.outputs.records import resumable
from scheduler_service.ports import Transaction
from scheduler_service.registry import JobRegistry

__all__ = ["resuming"]


async def resuming(
    tx: Transaction, registry: JobRegistry, leases: list[LeasePayload]
) -> list[LeasePayload]:
    """``leases`` with the text to continue from, for the later attempts of types that resume:
    what the latest earlier attempt wrote, unless it ended for its text's sake. A read only when
    such a lease is among them (a first attempt never has one)."""
    later = {
        lease.job_id
        for lease in leases
        if lease.attempt_no > 1
        and lease.job_type in registry
        and registry.get(lease.job_type).resumes
    }
    if not later:
        return leases
    earlier = await tx.outputs.earlier_text(later)
    resumed: list[LeasePayload] = []
    for lease in leases:
        error_code, text = earlier.get(lease.job_id, (None, ""))
        resume = bool(text) and resumable(error_code)
        resumed.append(replace(lease, resume_output=text) if resume else lease)
    return resumed

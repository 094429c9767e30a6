"""Job trees as rules, with no I/O (docs/architecture.md, *Job trees*): who may take children,
how a parent's children end it, and the children a splitting job is created with."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from scheduler_service.core.errors import (
    InvalidRequestError,
    JobNotFoundError,
    LifecycleError,
)
from scheduler_service.core.records import JobError, JobRecord
from scheduler_service.core.state_machine import LifecycleStatus
from shared.error_codes import ErrorCode

__all__ = [
    "RETRY_TRIGGER",
    "SPLIT_TRIGGER",
    "ChildOutcome",
    "ChildSummary",
    "JoinDecision",
    "JoinPolicy",
    "ParentClosedError",
    "TreeLimits",
    "TreePlacement",
    "check_parent",
    "decide_join",
    "join_policy_of",
]


#: The ``triggerType`` of children a job's split created: their outputs join into the parent's,
#: and are projected there, once, not at each child.
SPLIT_TRIGGER = "split"
#: The ``triggerType`` of a retried parent: its children are the retried ones (it does not split).
RETRY_TRIGGER = "retry"


class JoinPolicy(StrEnum):
    #: Every child must succeed; the first that fails for good fails the parent.
    ALL_SUCCESS = "all_success"
    #: Every child ends; the parent succeeds if at least its type's share did.
    ALL_DONE = "all_done"


@dataclass(frozen=True, slots=True)
class TreeLimits:
    """Bounds of a tree (settings ``AIJOB_TREE_*``)."""

    #: Levels below a root: a root's children are at depth 1.
    max_depth: int = 3
    max_children: int = 1_000
    #: The most a create may ask for as ``max_parallel``.
    max_parallel: int = 100
    #: The items one model call should write, where a type splits by items (quiz questions).
    split_items_per_call: int = 10


class ParentClosedError(LifecycleError):
    """The parent no longer takes children: it started, ended or was cancelled."""

    def __init__(self, parent: JobRecord) -> None:
        status = parent.lifecycleStatus
        why = (
            "a cancel was requested"
            if parent.cancelRequestedAt is not None
            else f"it is {status.value}"
        )
        super().__init__(parent.id, f"parent job takes no more children: {why}", status.value)
        self.code = (  # type: ignore[misc]
            ErrorCode.JOB_ALREADY_TERMINAL
            if status
            in (LifecycleStatus.SUCCEEDED, LifecycleStatus.FAILED, LifecycleStatus.CANCELLED)
            else ErrorCode.ILLEGAL_TRANSITION
        )


@dataclass(frozen=True, slots=True)
class TreePlacement:
    """Where new children go: their root and depth, and how many may start now."""

    root_job_id: str
    depth: int
    #: Children that may be available at once (the rest are held until siblings end).
    room: int


def check_parent(
    parent: JobRecord | None,
    user_id: str,
    parent_job_id: str,
    children: int,
    limits: TreeLimits,
    *,
    started_children: int = 0,
    max_parallel: int = 0,
) -> TreePlacement:
    """Whether ``parent`` (as locked) takes ``children`` more children of ``user_id``'s: another
    user's or a missing job is not found (as GetJob answers), a started, ended or cancelled one
    is closed, and the tree's depth and breadth stay within ``limits``. Of the new children, as
    many may start now as ``max_parallel`` (0: no bound) leaves beside ``started_children``
    (those not ended and not held)."""
    if parent is None or parent.userId != user_id:
        raise JobNotFoundError(parent_job_id)
    if parent.lifecycleStatus not in (LifecycleStatus.QUEUED, LifecycleStatus.WAITING) or (
        parent.cancelRequestedAt is not None
    ):
        raise ParentClosedError(parent)
    depth = parent.treeDepth + 1
    if depth > limits.max_depth:
        raise InvalidRequestError(
            f"a tree is at most {limits.max_depth} levels deep (AIJOB_TREE_MAX_DEPTH)",
            field="parent_job_id",
        )
    if parent.childrenTotal + children > limits.max_children:
        raise InvalidRequestError(
            f"a job has at most {limits.max_children} children (AIJOB_TREE_MAX_CHILDREN)",
            field="parent_job_id",
        )
    room = children
    if max_parallel > 0:
        room = max(0, min(children, max_parallel - started_children))
    return TreePlacement(parent.rootJobId or parent.id, depth, room)


def join_policy_of(value: str | None) -> JoinPolicy:
    return JoinPolicy(value) if value else JoinPolicy.ALL_SUCCESS


@dataclass(frozen=True, slots=True)
class ChildOutcome:
    job_id: str
    status: LifecycleStatus
    error_code: str | None
    output: Any
    #: Created by its parent's split (its output joins into the parent's).
    split: bool = False


@dataclass(frozen=True, slots=True)
class ChildSummary:
    """A parent's children by lifecycle status and, once it succeeded without them all (under
    ``all_done``), those that failed or were cancelled, with their codes."""

    counts: dict[str, int]
    unsuccessful: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class JoinDecision:
    """What a parent's children make of it: ``error`` fails it; otherwise it succeeds with
    ``outputs`` joined (a type with a join) or runs its own call (one without)."""

    error: JobError | None = None
    outputs: tuple[dict[str, Any], ...] = ()
    #: ``all_done``: the children that did not succeed, with their codes.
    missing: tuple[tuple[str, str], ...] = ()


def child_failed(child: ChildOutcome) -> JobError:
    code = child.error_code or child.status.value.upper()
    return JobError(
        ErrorCode.CHILD_FAILED.value,
        f"Child job {child.job_id} did not succeed ({code}).",
        f"child {child.job_id} ended {child.status.value} with {code}",
    )


def decide_join(
    policy: JoinPolicy, min_share: float, children: Sequence[ChildOutcome]
) -> JoinDecision:
    """The parent's end once every child has ended."""
    succeeded = [c for c in children if c.status is LifecycleStatus.SUCCEEDED]
    missing = tuple(
        (c.job_id, c.error_code or c.status.value.upper())
        for c in children
        if c.status is not LifecycleStatus.SUCCEEDED
    )
    outputs = tuple(c.output for c in succeeded if isinstance(c.output, dict))
    if not missing:
        return JoinDecision(outputs=outputs)
    if policy is JoinPolicy.ALL_SUCCESS:
        first = next(c for c in children if c.status is not LifecycleStatus.SUCCEEDED)
        return JoinDecision(error=child_failed(first))
    if not succeeded or len(succeeded) < min_share * len(children):
        return JoinDecision(
            error=JobError(
                ErrorCode.CHILD_FAILED.value,
                f"{len(succeeded)} of {len(children)} child jobs succeeded; "
                f"at least {min_share:.0%} must.",
                "; ".join(f"{job_id}: {code}" for job_id, code in missing),
            )
        )
    return JoinDecision(outputs=outputs, missing=missing)

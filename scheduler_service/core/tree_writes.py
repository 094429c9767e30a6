"""The lifecycle writes of job trees (docs/architecture.md, *Job trees*): a parent takes children
and waits; each child that ends moves its parent's counter in the child's own transaction; the
last one joins the parent, which succeeds, fails or goes to the queue to run its own call. Each
is one guarded UPDATE of the parent's row, like every write of ``core/transitions.py``."""

from __future__ import annotations

from scheduler_service.core.state_machine import LifecycleStatus, Operation
from scheduler_service.core.transitions import (
    ERROR_VALUES,
    Guard,
    LifecycleWrite,
    Miss,
    Now,
    Param,
    PlusParam,
    Source,
    one_source,
)

__all__ = ["ATTACH_CHILDREN", "CHILDREN_ENDED", "JOIN_FAIL", "JOIN_REQUEUE", "JOIN_SUCCEED"]

Q, W = LifecycleStatus.QUEUED, LifecycleStatus.WAITING
G = Guard

#: A parent takes ``children`` more children and waits for them; a cancel request closes it.
ATTACH_CHILDREN = LifecycleWrite(
    "attach_children",
    Operation.WAIT,
    (
        Source(Q, frozenset({G.NO_CANCEL_REQUEST}), frozenset({G.OWNER})),
        Source(W, frozenset({G.NO_CANCEL_REQUEST}), frozenset({G.OWNER})),
    ),
    {
        "childrenTotal": PlusParam("children"),
        "childrenOpen": PlusParam("children"),
        "maxParallel": Param("maxParallel", optional=True),
        "joinPolicy": Param("joinPolicy", optional=True),
        "availableAt": None,
    },
    Miss.QUIET,
)
#: ``ended`` (negative) of a waiting parent's children ended, in their own transaction; its
#: progress is the share of its children that ended.
CHILDREN_ENDED = LifecycleWrite(
    "children_ended",
    None,
    one_source(W),
    {"childrenOpen": PlusParam("ended"), "progress": Param("progress")},
    Miss.QUIET,
)
#: The last child ended and the children's outputs join into the parent's (pure data).
JOIN_SUCCEED = LifecycleWrite(
    "join_succeed",
    Operation.SUCCEED,
    one_source(W, G.CHILDREN_DONE),
    {
        "finishedAt": Now(),
        "progress": 100,
        "errorCode": None,
        "publicErrorMessage": None,
        "internalErrorMessage": None,
        "outputHash": Param("outputHash"),
        "validatedOutput": Param("validatedOutput"),
    },
    Miss.QUIET,
)
#: A child failed for good (``all_success``), or too few succeeded (``all_done``).
JOIN_FAIL = LifecycleWrite(
    "join_fail", Operation.FAIL, one_source(W), {"finishedAt": Now(), **ERROR_VALUES}, Miss.QUIET
)
#: The last child ended and the parent's own call joins them: it goes to the queue.
JOIN_REQUEUE = LifecycleWrite(
    "join_requeue",
    Operation.REQUEUE,
    one_source(W, G.CHILDREN_DONE),
    {"availableAt": Now(), "queuedAt": Now(), "progress": 0},
    Miss.QUIET,
)

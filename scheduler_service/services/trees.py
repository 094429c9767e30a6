"""Job trees (docs/architecture.md, *Job trees*): a waiting parent's fan-in when its last child
ends, cancels that reach every descendant, and a tree as callers read it (creates that place
children: ``services/tree_creates.py``).

Every step runs inside the transaction of the change that causes it: a child's end moves its
parent's counter (``tx.emit`` of the child's event calls :meth:`Trees.children_ended`), and the
last one joins the parent there and then. The parent's row lock orders concurrent ends (two
replicas finishing the last two children): one of them sees the counter reach 0, and the join's
guard (``childrenOpen = 0``, status waiting) lets it happen once.
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from scheduler_service.core import validation
from scheduler_service.core.errors import InvalidRequestError, JobNotFoundError
from scheduler_service.core.events import EventType, NewEvent
from scheduler_service.core.job_registry import JobRegistry
from scheduler_service.core.records import JobError, JobRecord
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.core.transitions import CANCEL, CANCEL_QUEUED, REQUEST_CANCEL
from scheduler_service.core.tree_writes import (
    JOIN_FAIL,
    JOIN_SUCCEED,
)
from scheduler_service.core.trees import (
    ChildOutcome,
    ChildSummary,
    JoinPolicy,
    decide_join,
    join_policy_of,
)
from scheduler_service.ports import Transaction, TreeNodeRow, TreeUsage, UnitOfWork
from shared.canonical_json import output_hash
from shared.error_codes import ErrorCode

__all__ = ["JobTree", "Trees"]

_ENDED = frozenset({EventType.COMPLETED, EventType.FAILED, EventType.CANCELLED})


@dataclass(frozen=True, slots=True)
class JobTree:
    nodes: list[TreeNodeRow]
    usage: TreeUsage


#: Leases up to ``count`` queued jobs of a type to runtimes of this replica with free slots,
#: inside a transaction (services/dispatch.py ``offer_within``).
Offer = Callable[[Transaction, str, int, None], Awaitable[object]]


class Trees:
    def __init__(
        self, uow: UnitOfWork, registry: JobRegistry, *, offer: Offer | None = None
    ) -> None:
        self._uow = uow
        self._registry = registry
        self._offer = offer

    async def _kept_outputs(self, tx: Transaction, parent: JobRecord) -> list[ChildOutcome]:
        """The succeeded split children of the parents ``parent`` retries (and theirs)."""
        kept: list[ChildOutcome] = []
        source = parent.retriedFromJobId
        while source:
            kept += [c for c in await tx.trees.children(source) if c.split and _succeeded(c)]
            earlier = await tx.reads.get(source)
            source = earlier.retriedFromJobId if earlier is not None else None
        return kept

    async def children_ended(self, tx: Transaction, events: Sequence[NewEvent]) -> None:
        """Children's ends, in their transaction: each parent's counter moves; a child failed for
        good fails an ``all_success`` parent; held siblings take the freed places; the last
        child joins its parent."""
        by_parent: dict[str, list[NewEvent]] = defaultdict(list)
        for event in events:
            if event.event_type in _ENDED and event.parent_job_id:
                by_parent[event.parent_job_id].append(event)
        # One lock order for every writer: concurrent ends of siblings queue on the parent.
        locked = await tx.reads.lock_rows(sorted(by_parent))
        moved: list[JobRecord] = []
        for parent_id in sorted(by_parent):
            parent = locked.jobs.get(parent_id)
            if parent is None or parent.lifecycleStatus is not LifecycleStatus.WAITING:
                continue  # the parent ended already (a failed sibling, a cancel)
            left = parent.childrenOpen - len(by_parent[parent_id])
            progress = (parent.childrenTotal - left) * 100 // max(1, parent.childrenTotal)
            moved.append(replace(parent, childrenOpen=left, progress=progress))
        # Every parent's counter in one write (they are locked and waiting: each row matches).
        await tx.trees.children_ended(
            [(p.id, p.childrenOpen - locked.jobs[p.id].childrenOpen, p.progress) for p in moved]
        )
        joining: list[tuple[JobRecord, JoinPolicy]] = []
        for parent in moved:
            parent_id, ended, left = parent.id, by_parent[parent.id], parent.childrenOpen
            policy = join_policy_of(parent.joinPolicy)
            failed = [e for e in ended if e.event_type is not EventType.COMPLETED]
            if failed and policy is JoinPolicy.ALL_SUCCESS:
                await self._fail(tx, parent, _failed_child(failed[0]))
                continue
            if left == 0:
                joining.append((parent, policy))
            elif parent.maxParallel > 0:
                released = await tx.trees.release_held(parent_id, len(ended))
                if released:
                    tx.after_commit(functools.partial(tx.wakeups.dispatch, tuple(released)))
            tx.job_changed(parent_id)
        if joining:
            await self._join_many(tx, joining)

    async def _join_many(
        self, tx: Transaction, joining: Sequence[tuple[JobRecord, JoinPolicy]]
    ) -> None:
        """The parents whose last children just ended, joined: their children read in one
        statement; those whose own call joins them go back to the queue in one write, with one
        write of their events, and runtimes here with free slots get the queue's best at once
        (the freed slots of their last children), in this transaction."""
        children = await tx.trees.children_of([parent.id for parent, _ in joining])
        requeued: list[JobRecord] = []
        for parent, policy in joining:
            if await self._join(tx, parent, policy, children.get(parent.id, [])):
                requeued.append(parent)
        if not requeued:
            return
        await tx.trees.requeue_joined([parent.id for parent in requeued])
        await tx.emit_many(
            [
                NewEvent.enqueue(
                    parent.id,
                    parent.jobType,
                    parent.queueName,
                    parent.priority,
                    parent.parentJobId,
                    dedupe="join",
                )
                for parent in requeued
            ]
        )
        if self._offer is not None:
            for job_type, count in Counter(parent.jobType for parent in requeued).items():
                await self._offer(tx, job_type, count, None)

    async def _join(
        self,
        tx: Transaction,
        parent: JobRecord,
        policy: JoinPolicy,
        children: list[ChildOutcome],
    ) -> bool:
        """Join one parent on its children: fail it, or succeed it with their joined output
        (pure data); True when its own call joins them (it goes back to the queue)."""
        definition = self._registry.get(parent.jobType)
        decision = decide_join(policy, definition.tree.min_share, children)
        if decision.error is not None:
            await self._fail(tx, parent, decision.error)
            return False
        split = [c for c in children if c.split and _succeeded(c)]
        split += await self._kept_outputs(tx, parent)
        join = definition.tree.join
        if join is None or not split:
            return True
        merged = join([c.output for c in split if isinstance(c.output, dict)])
        schema = self._registry.output_schema(parent.jobType, parent.outputSchemaVersion or None)
        try:
            validated = validation.against_schema(
                schema, merged, "output", ErrorCode.VALIDATION_FAILED
            )
        except InvalidRequestError as invalid:
            await self._fail(
                tx,
                parent,
                JobError(
                    ErrorCode.VALIDATION_FAILED.value,
                    "The children's outputs do not join into a valid output.",
                    str(invalid),
                ),
            )
            return False
        if not await tx.jobs.apply(
            JOIN_SUCCEED, parent.id, outputHash=output_hash(merged), validatedOutput=merged
        ):
            return False
        await tx.results.project_many([(definition.projector, parent, 0, validated)])
        await tx.emit(
            EventType.COMPLETED,
            job_id=parent.id,
            job_type=parent.jobType,
            parent_job_id=parent.parentJobId,
            attemptNo=0,
            **(
                {"missingChildren": [list(m) for m in decision.missing]} if decision.missing else {}
            ),
        )
        return False

    async def _fail(self, tx: Transaction, parent: JobRecord, error: JobError) -> None:
        """End the parent with ``error`` and cancel what is left of its tree below it."""
        if not await tx.jobs.apply(
            JOIN_FAIL,
            parent.id,
            errorCode=error.code,
            publicErrorMessage=error.public_message,
            internalErrorMessage=error.internal_message,
        ):
            return
        await self._cancel_below(tx, parent)
        await tx.emit(
            EventType.FAILED,
            job_id=parent.id,
            job_type=parent.jobType,
            parent_job_id=parent.parentJobId,
            errorCode=error.code,
        )

    async def cancel_tree(self, tx: Transaction, job: JobRecord, user_id: str | None) -> bool:
        """Cancel a waiting parent and every job below it that has not ended, in ``tx``: queued
        and waiting ones at once, running ones at once too (their runtimes are told to stop), so
        that nothing of the tree is created, leased or accepted once this commits. False when the
        job is not a waiting parent (a plain cancel applies)."""
        if job.lifecycleStatus is not LifecycleStatus.WAITING:
            return False
        if not await tx.jobs.apply(CANCEL_QUEUED, job.id, owner=user_id):
            return False
        await self._cancel_below(tx, job)
        await tx.emit(
            EventType.CANCELLED,
            job_id=job.id,
            job_type=job.jobType,
            parent_job_id=job.parentJobId,
        )
        return True

    async def _cancel_below(self, tx: Transaction, top: JobRecord) -> None:
        """Cancel every job below ``top`` that has not ended: parents before their children, so
        that each child's end finds its parent ended and moves nothing."""
        nodes = await tx.trees.nodes(top.rootJobId or top.id)
        below = _descendants(top.id, nodes)
        open_ids = [n.job_id for n in below if n.lifecycle_status not in _TERMINAL_VALUES]
        if not open_ids:
            return
        await tx.reads.lock_rows(open_ids)
        events: list[NewEvent] = []
        for node in below:
            if node.lifecycle_status in _TERMINAL_VALUES:
                continue
            if await tx.jobs.apply(CANCEL_QUEUED, node.job_id):
                pass
            elif await tx.jobs.apply(REQUEST_CANCEL, node.job_id) and await tx.jobs.apply(
                CANCEL, node.job_id
            ):
                tx.cancel_requested(node.job_id)
            else:
                continue
            events.append(
                NewEvent(EventType.CANCELLED, node.job_id, node.job_type, {}, node.parent_job_id)
            )
        await tx.emit_many(events)

    async def tree(self, user_id: str | None, job_id: str) -> JobTree:
        """The tree ``job_id`` belongs to (the caller's own, or any for admins), with the usage
        of every node's attempts."""
        validation.job_id(job_id)

        async def read(tx: Transaction) -> JobTree | None:
            job = await tx.reads.get(job_id)
            if job is None or (user_id is not None and job.userId != user_id):
                return None
            nodes = await tx.trees.nodes(job.rootJobId or job.id)
            return JobTree(nodes, await tx.trees.usage([n.job_id for n in nodes]))

        tree = await self._uow.read(read)
        if tree is None:
            raise JobNotFoundError(job_id)
        return tree

    async def children_of(self, job: JobRecord) -> ChildSummary | None:
        """A parent's children by status (and, when it succeeded without them all, those that
        did not, with their codes); None for a job with none."""
        if job.childrenTotal == 0:
            return None

        async def read(tx: Transaction) -> ChildSummary:
            counts = await tx.trees.child_counts(job.id)
            short = counts.get(LifecycleStatus.FAILED.value, 0) + counts.get(
                LifecycleStatus.CANCELLED.value, 0
            )
            if job.lifecycleStatus is not LifecycleStatus.SUCCEEDED or not short:
                return ChildSummary(counts)
            return ChildSummary(counts, tuple(await tx.trees.unsuccessful_children(job.id)))

        return await self._uow.read(read)


_TERMINAL_VALUES = frozenset(
    s.value for s in (LifecycleStatus.SUCCEEDED, LifecycleStatus.FAILED, LifecycleStatus.CANCELLED)
)


def _succeeded(child: ChildOutcome) -> bool:
    return child.status is LifecycleStatus.SUCCEEDED


def _descendants(top: str, nodes: Sequence[TreeNodeRow]) -> list[TreeNodeRow]:
    """The nodes below ``top``, parents before their children."""
    children: dict[str | None, list[TreeNodeRow]] = defaultdict(list)
    for node in nodes:
        children[node.parent_job_id].append(node)
    ordered: list[TreeNodeRow] = []
    frontier = [top]
    while frontier:
        level = [child for parent in frontier for child in children.get(parent, [])]
        ordered += level
        frontier = [node.job_id for node in level]
    return ordered


def _failed_child(event: NewEvent) -> JobError:
    code = str(event.payload.get("errorCode") or event.event_type.value.rsplit(".", 1)[-1])
    return JobError(
        ErrorCode.CHILD_FAILED.value,
        f"Child job {event.job_id} did not succeed ({code.upper()}).",
        f"child {event.job_id}: {code}",
    )

"""Job trees at create time (docs/architecture.md, *Job trees*): children placed under their
parents (a parent in the database, or one made in the same CreateJobs call as ``#N``), the
children a splitting job is created with, and a retried parent's children. Every step runs in
the create's transaction."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from scheduler_service.core.commands import CreateJobCommand
from scheduler_service.core.errors import InvalidRequestError, JobNotFoundError, SchedulerError
from scheduler_service.core.job_registry import JobRegistry
from scheduler_service.core.records import JobRecord, NewJob
from scheduler_service.core.state_machine import LifecycleStatus
from scheduler_service.core.tree_writes import ATTACH_CHILDREN
from scheduler_service.core.trees import (
    RETRY_TRIGGER,
    SPLIT_TRIGGER,
    ParentClosedError,
    TreeLimits,
    TreePlacement,
    check_parent,
)
from scheduler_service.ports import Transaction
from scheduler_service.services.new_jobs import retry_command

__all__ = ["Row", "TreeCreates", "TreePlan"]

#: A new job with its snapshot and params, as a create inserts it.
Row = tuple[NewJob, dict[str, Any], dict[str, Any]]


@dataclass
class TreePlan:
    """What a batch of creates does to trees: the rows it changes (children placed in their
    tree), the children splits add, the refusals, and what is left for after the insert."""

    placed: dict[int, Row] = field(default_factory=dict)
    refused: dict[int, SchedulerError] = field(default_factory=dict)
    #: The split children to insert with their parents.
    children: list[Row] = field(default_factory=list)
    #: New children held back by their parent's ``max_parallel``.
    held: list[str] = field(default_factory=list)
    #: New parents (that split, or that children of the same call name): (id, user, children).
    new_parents: list[tuple[str, str, int]] = field(default_factory=list)


class TreeCreates:
    def __init__(self, registry: JobRegistry, limits: TreeLimits) -> None:
        self._registry = registry
        self.limits = limits

    async def plan(
        self,
        tx: Transaction,
        creates: Sequence[tuple[int, CreateJobCommand, Row]],
        child_of: Callable[[CreateJobCommand], Row],
        earlier: Mapping[int, str] | None = None,
    ) -> TreePlan:
        """Place a batch's children in their parents' trees and split the jobs whose type splits
        them (their children are made by ``child_of`` and inserted with them). A parent in the
        database is locked and moved in ``tx``; one of the batch (``#N``: its item N, made in
        this call or found as a repeat in ``earlier``) takes its children once it is written.
        A refusal is that create's answer."""
        plan = TreePlan()
        earlier = earlier or {}
        fresh = {index: row for index, _, row in creates}
        by_parent: dict[tuple[str, str], list[tuple[int, Row]]] = {}
        for index, cmd, row in creates:
            if not cmd.parent_job_id:
                continue
            try:
                parent_id = _parent_named(cmd.parent_job_id, index, fresh, earlier)
            except SchedulerError as refusal:
                plan.refused[index] = refusal
                continue
            by_parent.setdefault((cmd.user_id, parent_id), []).append((index, row))
        new_parents = {row[0].job_id: index for index, row in fresh.items()}
        # Parents in the database first, in one lock order; then the batch's, parents first.
        for (user, parent_id), group in sorted(
            by_parent.items(),
            key=lambda item: (item[0][1] in new_parents, _order(item, new_parents)),
        ):
            try:
                if parent_id in new_parents:
                    index = new_parents[parent_id]
                    parent = plan.placed.get(index, fresh[index])[0]
                    placement = self._under_new(parent, user, len(group))
                    plan.new_parents.append((parent_id, user, len(group)))
                else:
                    placement = await self.attach(tx, user, parent_id, len(group))
            except SchedulerError as refusal:
                plan.refused |= dict.fromkeys((index for index, _ in group), refusal)
                continue
            for place, (index, (new, snapshot, params)) in enumerate(group):
                child = replace(
                    new,
                    parent_job_id=parent_id,
                    root_job_id=placement.root_job_id,
                    tree_depth=placement.depth,
                )
                plan.placed[index] = (child, snapshot, params)
                if place >= placement.room:
                    plan.held.append(child.job_id)
        for index, cmd, row in creates:
            if index in plan.refused:
                continue
            try:
                self._split(plan, cmd, plan.placed.get(index, row), child_of)
            except SchedulerError as refusal:
                plan.refused[index] = refusal
        return plan

    def _under_new(self, parent: NewJob, user_id: str, children: int) -> TreePlacement:
        """Where children of a parent made in the same call go (the checks of ``check_parent``
        on a row not yet written)."""
        if parent.user_id != user_id:
            raise JobNotFoundError(parent.job_id)
        depth = parent.tree_depth + 1
        if depth > self.limits.max_depth:
            raise InvalidRequestError(
                f"a tree is at most {self.limits.max_depth} levels deep (AIJOB_TREE_MAX_DEPTH)",
                field="parent_job_id",
            )
        if children > self.limits.max_children:
            raise InvalidRequestError(
                f"a job has at most {self.limits.max_children} children (AIJOB_TREE_MAX_CHILDREN)",
                field="parent_job_id",
            )
        room = min(children, parent.max_parallel) if parent.max_parallel else children
        return TreePlacement(parent.root_job_id or parent.job_id, depth, room)

    def _split(
        self,
        plan: TreePlan,
        cmd: CreateJobCommand,
        row: Row,
        child_of: Callable[[CreateJobCommand], Row],
    ) -> None:
        job, snapshot, params = row
        tree = self._registry.get(job.job_type).tree
        # A retried parent does not split again: its children are the ones run again.
        parts = (
            tree.split(snapshot, params, self.limits.split_items_per_call)
            if tree.split is not None and cmd.trigger_type != RETRY_TRIGGER
            else []
        )
        if not parts:
            return
        if job.tree_depth + 1 > self.limits.max_depth or len(parts) > self.limits.max_children:
            raise InvalidRequestError(
                f"the job would split below the tree's {self.limits.max_depth} levels "
                "(AIJOB_TREE_MAX_DEPTH)",
                field="parent_job_id",
            )
        limit = job.max_parallel
        for index, part in enumerate(parts):
            child, child_snapshot, child_params = child_of(
                replace(
                    cmd,
                    params=part,
                    idempotency_key=f"split:{job.job_id}:{index}",
                    parent_job_id="",
                    max_parallel=0,
                    join_policy="",
                    retried_from_job_id="",
                )
            )
            child = replace(
                child,
                parent_job_id=job.job_id,
                root_job_id=job.root_job_id or job.job_id,
                tree_depth=job.tree_depth + 1,
                trigger_type=SPLIT_TRIGGER,
            )
            plan.children.append((child, child_snapshot, child_params))
            if limit and index >= limit:
                plan.held.append(child.job_id)
        plan.new_parents.append((job.job_id, job.user_id, len(parts)))

    async def retry_commands(self, tx: Transaction, source: JobRecord) -> list[CreateJobCommand]:
        """RetryJob of a parent: a new parent (it does not split again) and, as its children
        (``#0``), the old children that did not succeed, run again."""
        snapshot, params = await tx.reads.snapshot(source.id)
        commands = [retry_command(source, snapshot, params, trigger_type=RETRY_TRIGGER)]
        again = [
            c.job_id
            for c in await tx.trees.children(source.id)
            if c.status is not LifecycleStatus.SUCCEEDED
        ]
        records = await tx.reads.get_many(again)
        for child_id in again:
            child = records[child_id]
            child_snapshot, child_params = await tx.reads.snapshot(child_id)
            commands.append(
                retry_command(
                    child,
                    child_snapshot,
                    child_params,
                    parent_job_id="#0",
                    trigger_type=child.triggerType,
                )
            )
        return commands

    async def after_insert(self, tx: Transaction, plan: TreePlan) -> None:
        """The plan's steps that need its rows written: split parents wait for their children,
        held children wait for room."""
        for parent_id, user, children in plan.new_parents:
            if not await tx.jobs.apply(ATTACH_CHILDREN, parent_id, owner=user, children=children):
                raise AssertionError(f"a new parent {parent_id} did not take its children")
        if plan.held:
            await tx.trees.hold(plan.held)

    async def attach(
        self,
        tx: Transaction,
        user_id: str,
        parent_job_id: str,
        children: int,
    ) -> TreePlacement:
        """Lock the parent and give it ``children`` more children of ``user_id``'s (it waits for
        them): where they go in its tree and how many may start now."""
        locked = await tx.reads.lock_rows([parent_job_id])
        parent = locked.jobs.get(parent_job_id)
        started = limit = 0
        if parent is not None:
            limit = parent.maxParallel
            if limit and parent.childrenTotal:
                started = parent.childrenOpen - await tx.trees.held_children(parent_job_id)
        placement = check_parent(
            parent,
            user_id,
            parent_job_id,
            children,
            self.limits,
            started_children=started,
            max_parallel=limit,
        )
        assert parent is not None
        if not await tx.jobs.apply(
            ATTACH_CHILDREN, parent_job_id, owner=user_id, children=children
        ):
            raise ParentClosedError(parent)
        tx.job_changed(parent_job_id)
        return placement


def _parent_named(
    name: str, index: int, fresh: Mapping[int, Row], earlier: Mapping[int, str]
) -> str:
    """The parent a create names: a job id, or ``#N``, item N of the same CreateJobs call."""
    if not name.startswith("#"):
        return name
    item = name[1:]
    if not item.isdigit() or int(item) >= index:
        raise InvalidRequestError(
            f"parent_job_id {name!r} must name an earlier item of this call (#0, #1...)",
            field="parent_job_id",
        )
    if int(item) in fresh:
        return str(fresh[int(item)][0].job_id)
    if int(item) in earlier:
        return earlier[int(item)]
    raise InvalidRequestError(f"item {name} of this call was not created", field="parent_job_id")


def _order(item: tuple[tuple[str, str], list[tuple[int, Row]]], new: Mapping[str, int]) -> Any:
    (_, parent_id), _ = item
    return new.get(parent_id, 0), parent_id

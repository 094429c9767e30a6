"""Creating, reading and cancelling jobs for a user, on domain types (docs/architecture.md,
*One job's walk*).

Every database step runs through the unit of work; the wake-ups that follow a commit (dispatch,
watchers, the outbox, a running job's cancel notice) are its hooks and events, never callbacks
wired in here.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scheduler_service.core import paging, validation
from scheduler_service.core.budgets import Budget
from scheduler_service.core.commands import CreateJobCommand, JobFilter, JobLimits
from scheduler_service.core.errors import (
    DatabaseUnavailableError,
    DuplicateKeyError,
    InvalidRequestError,
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRetryableError,
    SchedulerError,
)
from scheduler_service.core.events import EventType, NewEvent
from scheduler_service.core.job_registry import JobRegistry
from scheduler_service.core.records import (
    ArtifactRow,
    CancelOutcome,
    JobRecord,
    LeasePayload,
    NewJob,
    Placement,
    WatchState,
)
from scheduler_service.core.state_machine import LifecycleStatus, parse_status
from scheduler_service.core.warmup import WARM_FOR_S, followers
from scheduler_service.ports import NewJobRows, Transaction, UnitOfWork
from scheduler_service.services.admission import Admission
from scheduler_service.services.gathering import Gathering
from scheduler_service.services.new_jobs import new_job_of, retry_command, same_request
from scheduler_service.services.tree_creates import TreeCreates, TreePlan
from scheduler_service.services.trees import Trees

__all__ = ["MAX_BULK_CREATE", "CreateResult", "Created", "Handoff", "JobService"]

#: Most items one CreateJobs call may carry.
MAX_BULK_CREATE = 500


@dataclass(frozen=True, slots=True)
class Created:
    """One create's answer: the job, and whether this call created it (False: a repeat)."""

    job: JobRecord
    created: bool


CreateResult = Created | SchedulerError

#: Dispatch's ``offer_within``: leases up to n jobs of a type to runtimes here inside the
#: create's transaction (with the create's jobs, before their insert: of those only), and
#: registers its own after-commit delivery and after-rollback release on ``tx``.
Handoff = Callable[
    [Transaction, str, int, NewJobRows | None], Awaitable[list[tuple[str, LeasePayload]]]
]
#: A gathered create's answer: its result, or what its transaction raised.
_Gathered = Created | Exception

log = logging.getLogger(__name__)


class JobService:
    def __init__(
        self,
        uow: UnitOfWork,
        registry: JobRegistry,
        *,
        limits: JobLimits | None = None,
        handoff: Handoff | None = None,
        budget: Budget | None = None,
        create_window_s: float = 0.0,
        create_batch_max: int = 64,
        create_batches_in_flight: int = 2,
        clock: Callable[[], datetime | None] = lambda: None,
    ) -> None:
        #: The database's now (db/clock.py): dates off-peak jobs' default deadlines.
        self._clock = clock
        self._uow = uow
        self._registry = registry
        self._limits = limits or JobLimits()
        #: The default daily budget of a user no operator set one for.
        self._budget = budget or Budget()
        self._handoff = handoff
        self._admission = Admission(self._limits, self._budget)
        #: Job trees: children placed under their parents, splits, cancels over a tree.
        self.trees = Trees(uow, registry, offer=handoff)
        self._tree_creates = TreeCreates(registry, self._limits.tree)
        self._creates: Gathering[CreateJobCommand, _Gathered] = Gathering(
            self._create_gathered,
            window_s=create_window_s,
            max_batch=min(create_batch_max, MAX_BULK_CREATE),
            max_in_flight=create_batches_in_flight,
        )

    async def create(
        self, cmd: CreateJobCommand, *, enforce_limits: bool = True
    ) -> tuple[JobRecord, bool]:
        """CreateJob: the job, its snapshot and its ``ai.job.enqueue`` event in one transaction;
        ``created=False`` for a repeat with the same (user, job type, idempotency key), and the
        same key with a different request is refused.

        Creates that arrive together (concurrent callers, within the create window) share one
        group commit, :meth:`create_many` of them all, each with its own checks, idempotency and
        answer; a lone create is a batch of one. A RetryJob (``enforce_limits`` off) goes alone.
        """
        if cmd.parent_job_id.startswith("#"):
            raise InvalidRequestError(
                "parent_job_id #N names an item of the same CreateJobs call", field="parent_job_id"
            )
        if enforce_limits:
            result: _Gathered = await self._creates.submit(cmd)
        else:
            (result,) = await self.create_many([cmd], enforce_limits=False)
        if isinstance(result, Exception):
            raise result
        return result.job, result.created

    async def _create_gathered(self, commands: list[CreateJobCommand]) -> list[_Gathered]:
        """A gathering of creates as one :meth:`create_many`. Should its transaction fail for a
        reason that is not one create's (anything but the database being away), each is made
        again on its own, so one bad create cannot cost the others theirs."""
        try:
            return list(await self.create_many(commands))
        except DatabaseUnavailableError as away:
            return [away] * len(commands)
        except Exception as exc:
            if len(commands) == 1:
                return [exc]
            log.exception(
                "create batch failed; creating its jobs one by one",
                extra={"action": "create_batch_error", "creates": len(commands)},
            )
        alone: list[_Gathered] = []
        for command in commands:
            try:
                alone.extend(await self.create_many([command]))
            except Exception as exc:
                alone.append(exc)
        return alone

    async def _waiting(
        self, tx: Transaction, plan: TreePlan, jobs: Sequence[NewJob]
    ) -> tuple[set[str], list[str]]:
        """The new jobs no runtime may take yet: parents that split, held children, and those
        waiting for their prompt's prefix to warm (core/warmup.py), the last also apart."""
        waiting = {*plan.held, *(parent for parent, _, _ in plan.new_parents)}
        candidates = [j for j in jobs if j.prefix_key is not None and j.job_id not in waiting]
        if not candidates:
            return waiting, []
        groups = {(j.user_id, str(j.prefix_key)) for j in candidates}
        leading, warm = await tx.warmups.warming(groups, self._limits.warmup.wait_s, WARM_FOR_S)
        warming = followers(candidates, leading, warm)
        return waiting | set(warming), warming

    async def drain(self) -> None:
        """Finish the creates gathered or running (on shutdown)."""
        await self._creates.drain()

    async def create_many(
        self, commands: Sequence[CreateJobCommand], *, enforce_limits: bool = True
    ) -> list[CreateResult]:
        """Create several jobs, each validated, deduplicated by its idempotency key and checked
        against its user's caps and budget (unless ``enforce_limits`` is off: a RetryJob),
        answering each in order with its job or the error its own CreateJob raises. The jobs
        that pass commit together: one transaction, multi-row inserts, one wake-up of the
        dispatcher, and a hand-off to a local runtime with a free slot."""
        if len(commands) > MAX_BULK_CREATE:
            raise InvalidRequestError(f"at most {MAX_BULK_CREATE} items per call", field="items")
        results: dict[int, CreateResult] = {}
        prepared: dict[int, tuple[NewJob, dict[str, Any], dict[str, Any]]] = {}
        for index, cmd in enumerate(commands):
            try:
                prepared[index] = new_job_of(cmd, self._registry, self._limits, self._clock())
            except SchedulerError as exc:
                results[index] = exc
        for _ in range(3):
            try:
                results |= await self._create_prepared(commands, prepared, enforce_limits)
                break
            except DuplicateKeyError:
                # A concurrent create took one of the keys: the next round finds it as existing.
                continue
        else:
            results |= await self._create_prepared(commands, prepared, enforce_limits)
        return [results[index] for index in range(len(commands))]

    async def _create_prepared(
        self,
        commands: Sequence[CreateJobCommand],
        prepared: dict[int, tuple[NewJob, dict[str, Any], dict[str, Any]]],
        enforce_limits: bool,
    ) -> dict[int, CreateResult]:
        keys = {i: commands[i].idempotency_key_tuple() for i in prepared}
        wanted = {key for key in keys.values() if key is not None}
        existing_ids: dict[tuple[str, str, str], str] = {}
        existing: dict[str, JobRecord] = {}
        if wanted:
            existing_ids = await self._uow.read(lambda tx: tx.reads.ids_by_keys(wanted))
        if existing_ids:
            existing = await self._uow.read(
                lambda tx: tx.reads.get_many(list(existing_ids.values()))
            )
        results: dict[int, CreateResult] = {}
        first_of_key: dict[tuple[str, str, str], int] = {}
        fresh: list[int] = []
        for index in prepared:
            key = keys[index]
            if key is not None and key in existing_ids:
                results[index] = self._bulk_same(
                    existing[existing_ids[key]], index, commands, prepared
                )
            elif key is not None and key in first_of_key:
                continue  # answered below, like its first occurrence
            else:
                if key is not None:
                    first_of_key[key] = index
                fresh.append(index)

        async def insert(tx: Transaction) -> tuple[dict[int, CreateResult], list[int]]:
            refusals, accepted = await self._admission.admitted(
                tx, [(i, commands[i].user_id, prepared[i][0]) for i in fresh], enforce_limits
            )
            refused: dict[int, CreateResult] = dict(refusals)
            if not accepted:
                return refused, accepted
            plan = await self._tree_creates.plan(
                tx,
                [(i, commands[i], prepared[i]) for i in accepted],
                lambda cmd: new_job_of(cmd, self._registry, self._limits, self._clock()),
                {i: r.job.id for i, r in results.items() if isinstance(r, Created)},
            )
            refused |= plan.refused
            accepted = [i for i in accepted if i not in plan.refused]
            rows_of = [plan.placed.get(i, prepared[i]) for i in accepted] + plan.children
            places = await tx.gates.fair_places([job for job, _, _ in rows_of])
            # The events first: between a job's insert and the commit stands only what must.
            await tx.emit_many(
                [
                    NewEvent.enqueue(
                        job.job_id, job.job_type, job.queue_name, job.priority, job.parent_job_id
                    )
                    for job, _, _ in rows_of
                ]
            )
            # Offered in the claim's order (priority, then the users' fair places); a parent
            # that splits, a held child and a job waiting for its prompt's prefix to warm wait.
            waiting, warming = await self._waiting(tx, plan, [job for job, _, _ in rows_of])
            ranked = sorted(
                (k for k in range(len(rows_of)) if rows_of[k][0].job_id not in waiting),
                key=lambda k: (rows_of[k][0].priority, places[k]),
            )
            leased = await self._hand_off_fresh(tx, [rows_of[k] for k in ranked])
            written = await tx.jobs.create_many(rows_of, places, leased=leased)
            await self._tree_creates.after_insert(tx, plan)
            await tx.warmups.hold(warming, self._limits.warmup.wait_s)
            if plan.new_parents or plan.held or warming:
                written = None  # the parents and held children moved since their insert
            # The reply's rows: as the insert wrote them, or read before commit on the same
            # connection (saves a checkout).
            rows = written or await tx.reads.get_many([prepared[i][0].job_id for i in accepted])
            for index in accepted:
                refused[index] = Created(rows[prepared[index][0].job_id], True)
            if self._handoff is not None:
                # Older jobs went first, or the fresh ones were not placed: runtimes here with
                # free slots get the queue's best in this same transaction.
                types = Counter(
                    job.job_type
                    for job, _, _ in rows_of
                    if job.job_id not in leased and job.job_id not in waiting
                )
                for job_type, count in types.items():
                    await self._handoff(tx, job_type, count, None)
            return refused, accepted

        created, _accepted = await self._uow.run(insert)
        results |= created
        for index in prepared:
            key = keys[index]
            if index in results or key is None:
                continue
            first = results[first_of_key[key]]
            results[index] = (
                self._bulk_same(first.job, index, commands, prepared)
                if isinstance(first, Created)
                else first
            )
        return results

    async def _hand_off_fresh(self, tx: Transaction, rows: NewJobRows) -> dict[str, Placement]:
        """The new jobs that runtimes here waiting for their types take as they are written:
        each is inserted already leased, so its lease leaves with the commit."""
        if self._handoff is None:
            return {}
        by_type: dict[str, list[tuple[NewJob, dict[str, Any], dict[str, Any]]]] = {}
        for row in rows:
            by_type.setdefault(row[0].job_type, []).append(row)
        placed: dict[str, Placement] = {}
        for job_type, fresh in by_type.items():
            for holder, lease in await self._handoff(tx, job_type, len(fresh), fresh):
                placed[lease.job_id] = Placement(holder, lease.lease_token, lease.lock_until)
        return placed

    def _bulk_same(
        self,
        existing: JobRecord,
        index: int,
        commands: Sequence[CreateJobCommand],
        prepared: dict[int, tuple[NewJob, dict[str, Any], dict[str, Any]]],
    ) -> CreateResult:
        try:
            return Created(same_request(existing, prepared[index][0], commands[index]), False)
        except SchedulerError as exc:
            return exc

    async def get(self, user_id: str | None, job_id: str) -> tuple[JobRecord, list[ArtifactRow]]:
        """A job with its artifacts. With ``user_id``, only that user's: another user's job is
        "not found", like a missing one. Without it (admins), any job."""
        validation.job_id(job_id)

        async def read(tx: Transaction) -> tuple[JobRecord | None, list[ArtifactRow]]:
            job = await tx.reads.get(job_id)
            if job is None or (user_id is not None and job.userId != user_id):
                return None, []
            return job, await tx.results.artifacts(job_id)

        job, artifacts = await self._uow.read(read)
        if job is None:
            raise JobNotFoundError(job_id)
        return job, artifacts

    async def get_any(self, job_id: str) -> tuple[JobRecord, list[ArtifactRow]]:
        """Any job (admins)."""
        return await self.get(None, job_id)

    async def artifacts(self, job_id: str) -> list[ArtifactRow]:
        return await self._uow.read(lambda tx: tx.results.artifacts(job_id))

    async def cancel(self, user_id: str, job_id: str) -> tuple[JobRecord, CancelOutcome]:
        """Cancel a queued job at once (with its ``ai.job.cancelled`` event, in one transaction),
        or ask a running one to stop; a waiting parent is cancelled with every job below it."""
        validation.job_id(job_id)

        async def cancel(tx: Transaction) -> tuple[JobRecord, CancelOutcome]:
            job = await tx.reads.get(job_id)
            if (
                job is not None
                and job.lifecycleStatus is LifecycleStatus.WAITING
                and await self.trees.cancel_tree(tx, job, user_id)
            ):
                ended = await tx.reads.get(job_id)
                assert ended is not None
                return ended, CancelOutcome.CANCELLED
            outcome = await tx.jobs.request_cancellation(job_id, user_id=user_id)
            job = await tx.reads.get(job_id)
            assert job is not None
            if outcome is CancelOutcome.CANCELLED:
                await tx.emit(
                    EventType.CANCELLED,
                    job_id=job_id,
                    job_type=job.jobType,
                    parent_job_id=job.parentJobId,
                )
            else:
                tx.cancel_requested(job_id)
            return job, outcome

        return await self._uow.run(cancel)

    async def list_jobs(
        self, filters: JobFilter, page_size: int, page_token: str
    ) -> tuple[list[JobRecord], str]:
        """One page of jobs, newest first, and the token of the next page ("" on the last)."""
        if filters.lifecycle_status:
            try:
                parse_status(filters.lifecycle_status)
            except ValueError:
                raise InvalidRequestError(
                    "lifecycle_status must be queued, waiting, running, succeeded, failed or "
                    "cancelled",
                    field="lifecycle_status",
                ) from None
        size = paging.page_size(page_size)
        cursor = paging.decode(page_token, filters.scope())
        before = (cursor.created_at, cursor.job_id) if cursor else None
        rows = await self._uow.read(
            lambda tx: tx.reads.page(filters, limit=size + 1, before=before)
        )
        if len(rows) <= size:
            return rows, ""
        last = rows[size - 1]
        return rows[:size], paging.encode(paging.Cursor(last.createdAt, last.id), filters.scope())

    async def watch(
        self,
        user_id: str | None,
        job_id: str,
        *,
        changed: Callable[[str, WatchState], Awaitable[None]],
        current: Callable[[str], Awaitable[JobRecord | None]] | None = None,
    ) -> AsyncGenerator[JobRecord, None]:
        """The job now, then each change of state, progress or attempt; ends when terminal.

        ``changed(job_id, seen)`` returns once the job's state differs from ``seen`` (the
        replica's watch hub reads every watched job once an interval, and wakes a watcher at once
        when this replica changes its job); the job is read again only then, by ``current``
        (the hub's read, shared by the job's watchers) when given.
        """
        job, _ = await self.get(user_id, job_id)
        yield job
        seen = job.watch_state()
        while not job.is_terminal:
            await changed(job_id, seen)
            now = await (current or self._read_job)(job_id)
            if now is None:
                return
            job = now
            if job.watch_state() != seen:
                seen = job.watch_state()
                yield job

    async def _read_job(self, job_id: str) -> JobRecord | None:
        return await self._uow.read(lambda tx: tx.reads.get(job_id))

    async def retry(self, job_id: str) -> JobRecord:
        """A new job with the input of a failed or cancelled one; repeats return the same job.
        A parent's retry is a new parent whose children are the old one's that did not succeed,
        run again; those that did keep their results (its join reads them)."""
        source, _ = await self.get_any(job_id)
        if source.lifecycleStatus not in (LifecycleStatus.FAILED, LifecycleStatus.CANCELLED):
            raise JobNotRetryableError(job_id, source.lifecycleStatus.value)
        if source.childrenTotal:
            # A tree: a new parent with the children that did not succeed run again.
            commands = await self._uow.read(
                lambda tx: self._tree_creates.retry_commands(tx, source)
            )
            (first, *_) = await self.create_many(commands, enforce_limits=False)
            if isinstance(first, Exception):
                raise first
            return first.job
        snapshot, params = await self._uow.read(lambda tx: tx.reads.snapshot(job_id))
        job, _created = await self.create(
            retry_command(source, snapshot, params), enforce_limits=False
        )
        return job

    async def cancel_user_jobs(self, user_id: str) -> tuple[int, int]:
        """Cancel a user's queued jobs and ask their running ones to stop (consent withdrawn)."""
        validation.user_id(user_id, "user_id")
        cancelled = requested = 0
        while batch := await self._uow.read(
            lambda tx: tx.reads.awaiting_cancel(user_id, limit=500)
        ):
            progressed = False
            # Roots first, and only them while there are any: a root's cancel reaches its
            # tree (a child cancelled alone would fail its parent CHILD_FAILED).
            for job in [j for j in batch if j.parentJobId is None] or batch:
                try:
                    _, outcome = await self.cancel(user_id, job.id)
                except (JobNotCancellableError, JobNotFoundError):
                    continue  # finished meanwhile
                progressed = True
                if outcome is CancelOutcome.CANCELLED:
                    cancelled += 1
                else:
                    requested += 1
            if not progressed:
                break
        return cancelled, requested

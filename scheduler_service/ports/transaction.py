"""The unit of work and its transaction: how the services run against the stores.

    result = await uow.run(work)      # work(tx) in one transaction, re-run whole on a conflict
    value = await uow.read(query)     # query(tx) outside any transaction of ours

A transaction holds one store per aggregate (:class:`Stores`), each bound to it;
``tx.after_commit`` / ``tx.after_rollback`` queue hooks; ``tx.emit`` writes a job's outbox event in
the transaction and queues this replica's local wake-ups (dispatch, watchers, the outbox loop) for
after the commit. The SQL adapter is :mod:`scheduler_service.sql.uow`; tests run the same services
over an in-memory one (``tests/support/fake_uow.py``). See docs/architecture.md.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from scheduler_service.core.events import EventType, NewEvent
from scheduler_service.core.output_records import ChunkRow
from scheduler_service.ports.jobs import JobReads, JobStore, JobSweeps
from scheduler_service.ports.routes import RouteStore
from scheduler_service.ports.stores import (
    GateStore,
    ModelKeyStore,
    OutboxStore,
    OutputStore,
    ResultStore,
    SpendStore,
)
from scheduler_service.ports.trees import TreeStore
from scheduler_service.ports.warmups import WarmupStore

__all__ = ["Hook", "Stores", "Transaction", "UnitOfWork", "Wakeups"]

T = TypeVar("T")
#: Something to run once a transaction has ended; may return an awaitable.
Hook = Callable[[], Awaitable[None] | None]


def _noop(*_args: Any) -> None:
    return None


async def _no_children(*_args: Any) -> None:
    return None


@dataclass
class Wakeups:
    """This replica's in-memory reactions to committed changes; wired by the app.

    They only shorten waits: every loop they wake also runs on its own timer, which is what
    covers changes committed through other replicas.
    """

    #: These jobs are being created here (called in the transaction, before its commit).
    enqueuing: Callable[[Sequence[str]], None] = _noop
    #: These jobs were enqueued: dispatch them (one wake-up per commit, whatever its size).
    dispatch: Callable[[Sequence[str]], None] = _noop
    #: A new outbox row of this type: run an outbox round (soon, or at once).
    outbox: Callable[[EventType], None] = _noop
    #: A job changed: wake its watchers.
    job_changed: Callable[[str], None] = _noop
    #: A job's attempt ended: no stream here holds its lease any more.
    job_ended: Callable[[str], None] = _noop
    #: A running job was asked to stop: tell the stream that holds it.
    cancel_requested: Callable[[str], None] = _noop
    #: Output chunks were stored: hand them to this replica's output streams.
    output_written: Callable[[Sequence[ChunkRow]], None] = _noop
    #: Children ended (their events, in the transaction that ended them): their parents'
    #: counters move and the last one joins its parent, in that same transaction.
    children_ended: Callable[[Transaction, Sequence[NewEvent]], Awaitable[None]] = _no_children


@dataclass(frozen=True, slots=True)
class Stores:
    """One store per aggregate, bound to one transaction."""

    jobs: JobStore
    reads: JobReads
    sweeps: JobSweeps
    gates: GateStore
    keys: ModelKeyStore
    spend: SpendStore
    results: ResultStore
    outbox: OutboxStore
    outputs: OutputStore
    trees: TreeStore
    warmups: WarmupStore
    routes: RouteStore


class Transaction:
    """One attempt of a unit of work (or one read): its stores and what follows a commit."""

    def __init__(self, stores: Stores, wakeups: Wakeups, *, writable: bool = True) -> None:
        #: The lifecycle writes.
        self.jobs = stores.jobs
        #: Reads of jobs; the reaper's sweeps.
        self.reads = stores.reads
        self.sweeps = stores.sweeps
        #: The users' gates (caps, quotas, fair places).
        self.gates = stores.gates
        #: The model keys' limits and flow state.
        self.keys = stores.keys
        #: Usage, spend and budgets.
        self.spend = stores.spend
        #: Business rows and artifacts of accepted outputs.
        self.results = stores.results
        self.outbox = stores.outbox
        #: The chunks of text attempts write as they go.
        self.outputs = stores.outputs
        #: A parent's children, held children, a whole tree.
        self.trees = stores.trees
        #: Jobs that share a prompt prefix, held until its first call warms the cache.
        self.warmups = stores.warmups
        #: The operators' model routes and the model keys' circuit breakers.
        self.routes = stores.routes
        self.wakeups = wakeups
        self.writable = writable
        self._after_commit: list[Hook] = []
        #: How many hooks at the front of ``_after_commit`` were added ``first``.
        self._first_hooks = 0
        self._after_rollback: list[Hook] = []

    def after_commit(self, hook: Hook, *, first: bool = False) -> None:
        """Run ``hook`` once this transaction has committed (never if it rolls back). Hooks
        run in the order they were added, those added ``first`` (a lease for a waiting
        runtime) before all others: what they wake is scheduled ahead of the other wake-ups'
        readers."""
        if first:
            self._after_commit.insert(self._first_hooks, hook)
            self._first_hooks += 1
        else:
            self._after_commit.append(hook)

    def after_rollback(self, hook: Hook) -> None:
        """Run ``hook`` if this attempt rolls back (a re-run is a new attempt with new hooks)."""
        self._after_rollback.append(hook)

    async def emit(
        self,
        event_type: EventType,
        *,
        job_id: str,
        job_type: str,
        parent_job_id: str | None = None,
        **payload: Any,
    ) -> None:
        """Write the job's outbox event in this transaction; wake the local readers on commit."""
        await self.emit_many([NewEvent(event_type, job_id, job_type, payload, parent_job_id)])

    async def emit_many(self, events: Sequence[NewEvent]) -> None:
        """Several jobs' events in one write; the same wake-ups as one ``emit`` each."""
        if not self.writable:
            raise RuntimeError("a read cannot emit events")
        if not events:
            return
        await self.outbox.add(events)
        wake = self.wakeups
        for event_type in dict.fromkeys(e.event_type for e in events):
            self.after_commit(functools.partial(wake.outbox, event_type))
        for event in events:
            self.after_commit(functools.partial(wake.job_changed, event.job_id))
            if event.event_type is not EventType.ENQUEUE:
                self.after_commit(functools.partial(wake.job_ended, event.job_id))
        enqueued = tuple(e.job_id for e in events if e.event_type is EventType.ENQUEUE)
        if enqueued:
            wake.enqueuing(enqueued)
            self.after_commit(functools.partial(wake.dispatch, enqueued))
        children = [e for e in events if e.parent_job_id and e.event_type is not EventType.ENQUEUE]
        if children:
            await wake.children_ended(self, children)

    def job_changed(self, job_id: str) -> None:
        """A change with no event (progress, a lease): wake the job's watchers on commit."""
        self.after_commit(lambda: self.wakeups.job_changed(job_id))

    def attempt_ended(self, job_id: str) -> None:
        """An attempt ended without ending the job (a requeue): the stream no longer holds it."""
        self.job_changed(job_id)
        self.after_commit(lambda: self.wakeups.job_ended(job_id))

    def cancel_requested(self, job_id: str) -> None:
        """A running job was asked to stop: its watchers and its stream hear of it on commit."""
        self.job_changed(job_id)
        self.after_commit(lambda: self.wakeups.cancel_requested(job_id))

    async def run_hooks(self, *, committed: bool) -> None:
        """Called by the unit of work once the attempt has ended."""
        hooks = self._after_commit if committed else self._after_rollback
        self._after_commit, self._after_rollback, self._first_hooks = [], [], 0
        for hook in hooks:
            outcome = hook()
            if outcome is not None:
                await outcome


class UnitOfWork(Protocol):
    @property
    def wakeups(self) -> Wakeups: ...

    async def run(self, work: Callable[[Transaction], Awaitable[T]]) -> T:
        """Run ``work`` in one transaction; re-run all of it on a retryable conflict."""
        ...

    async def read(self, query: Callable[[Transaction], Awaitable[T]]) -> T:
        """Run ``query`` outside any transaction of ours, with the same error mapping."""
        ...

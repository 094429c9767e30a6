"""The unit of work on SQL: the one way the scheduler runs a transaction or a read.

:class:`SqlUnitOfWork` implements :class:`scheduler_service.ports.UnitOfWork` on an async
SQLAlchemy engine. Each attempt is a fresh transaction whose stores are the SQL ones bound to its
connection; deadlocks and lock-wait timeouts re-run the whole attempt with jittered backoff
(as InnoDB's manual asks), after the rolled-back attempt's ``after_rollback`` hooks have run and
its other hooks were dropped. Errors leave in one shape whatever the path, reads included: a
database that cannot be reached (or a Galera node that is not ready) is
:class:`DatabaseUnavailableError`, answered UNAVAILABLE with the catalogue's
``PLATFORM_UNAVAILABLE`` reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Set
from typing import TypeVar

from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from scheduler_service.core.errors import (
    DatabaseBusyError,
    DatabaseUnavailableError,
    DuplicateKeyError,
)
from scheduler_service.core.events import EventType
from scheduler_service.ports import Stores, Transaction, Wakeups
from scheduler_service.sql import job_statements as lifecycle_sql
from scheduler_service.sql.db.driver import commit_with_queued
from scheduler_service.sql.db.engine import mark_committed
from scheduler_service.sql.db.retry import (
    is_missing_legacy_status,
    is_retryable_conflict,
    is_unavailable,
    mysql_errno,
)
from scheduler_service.sql.gates import SqlGateStore
from scheduler_service.sql.job_store import LeaseTimes, SqlJobReads, SqlJobStore, SqlJobSweeps
from scheduler_service.sql.model_key_store import SqlModelKeyStore
from scheduler_service.sql.outbox_writer import SqlOutboxStore
from scheduler_service.sql.output_store import SqlOutputStore
from scheduler_service.sql.result_store import SqlResultStore
from scheduler_service.sql.route_store import SqlRouteStore
from scheduler_service.sql.spend_store import SqlSpendStore
from scheduler_service.sql.tree_store import SqlTreeStore
from scheduler_service.sql.warmup_store import SqlWarmupStore

__all__ = ["LeaseTimes", "SqlTransaction", "SqlUnitOfWork"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Runs of one transaction before a conflict is given up: sized for a Galera cluster, where
#: certification conflicts between writer nodes come in bursts (the backoff doubles, capped).
MAX_ATTEMPTS = 8
#: The longest wait between two runs.
MAX_BACKOFF_S = 0.5


class SqlTransaction(Transaction):
    """A transaction (or read) on one connection; ``conn`` is for the SQL adapters only."""

    def __init__(
        self,
        conn: AsyncConnection,
        wakeups: Wakeups,
        lease: LeaseTimes,
        *,
        writable: bool = True,
        published: Set[EventType] = frozenset(),
    ) -> None:
        super().__init__(sql_stores(conn, lease, published), wakeups, writable=writable)
        self.conn = conn


def sql_stores(
    conn: AsyncConnection, lease: LeaseTimes, published: Set[EventType] = frozenset()
) -> Stores:
    """Every store, on ``conn``; events of the ``published`` types are written published."""
    reads = SqlJobReads(conn, lease)
    return Stores(
        jobs=SqlJobStore(conn, lease, reads),
        reads=reads,
        sweeps=SqlJobSweeps(conn, lease),
        gates=SqlGateStore(conn),
        keys=SqlModelKeyStore(conn),
        spend=SqlSpendStore(conn),
        results=SqlResultStore(conn),
        outbox=SqlOutboxStore(conn, published),
        outputs=SqlOutputStore(conn),
        trees=SqlTreeStore(conn),
        warmups=SqlWarmupStore(conn),
        routes=SqlRouteStore(conn),
    )


class SqlUnitOfWork:
    def __init__(
        self,
        engine: AsyncEngine,
        wakeups: Wakeups | None = None,
        *,
        lease: LeaseTimes | None = None,
        attempts: int = MAX_ATTEMPTS,
        base_delay_s: float = 0.005,
    ) -> None:
        self.engine = engine
        self._wakeups = wakeups or Wakeups()
        self.lease = lease or LeaseTimes()
        self._attempts = attempts
        self._base_delay_s = base_delay_s
        #: Kept by the app's health check: while it fails, work is refused at once
        #: (UNAVAILABLE) rather than left to wait on a database that does not answer.
        self.reachable = True
        #: The event types no outbox sink takes (set by the app once its sinks are known):
        #: their events are written published, with nothing to deliver.
        self.published_at_write: frozenset[EventType] = frozenset()

    @property
    def wakeups(self) -> Wakeups:
        return self._wakeups

    async def run(self, work: Callable[[SqlTransaction], Awaitable[T]]) -> T:
        """Run ``work`` in one transaction; re-run all of it on a deadlock or lock-wait timeout.

        ``work`` must be safe to run again from the start: each attempt is a fresh transaction.
        """
        self._check_reachable()
        for attempt in range(1, self._attempts + 1):
            try:
                return await self._attempt(work)
            except DBAPIError as exc:
                if lifecycle_sql.shadow_write() and is_missing_legacy_status(exc):
                    # The contract step dropped ``status`` under this replica: stop writing it
                    # and run the work again, before the next sweep would have noticed.
                    lifecycle_sql.set_shadow_write(False)
                    log.warning("legacy status column gone", extra={"action": "db_contracted"})
                    return await self.run(work)
                if not is_retryable_conflict(exc):
                    raise
                if attempt == self._attempts:
                    # Never INTERNAL: nothing was written and a retry may well pass.
                    raise DatabaseBusyError("the database is busy, try again") from exc
                log.warning(
                    "transaction conflict, re-running",
                    extra={"action": "db_retry", "attempt": attempt, "errno": mysql_errno(exc)},
                )
                # Full jitter keeps the re-runs of two conflicting transactions apart.
                ceiling = min(MAX_BACKOFF_S, self._base_delay_s * 2**attempt)
                await asyncio.sleep(random.uniform(0, ceiling))
        raise AssertionError("unreachable")

    async def read(self, query: Callable[[SqlTransaction], Awaitable[T]]) -> T:
        """Run ``query`` on one connection outside any transaction of ours."""
        self._check_reachable()
        async with _mapped_errors(), self.engine.connect() as conn:
            return await query(SqlTransaction(conn, self._wakeups, self.lease, writable=False))

    def _check_reachable(self) -> None:
        if not self.reachable:
            raise DatabaseUnavailableError("the database is unavailable, try again")

    async def _attempt(self, work: Callable[[SqlTransaction], Awaitable[T]]) -> T:
        tx: SqlTransaction | None = None
        try:
            async with _mapped_errors(), self.engine.connect() as conn:
                async with conn.begin():
                    tx = SqlTransaction(
                        conn, self._wakeups, self.lease, published=self.published_at_write
                    )
                    result = await work(tx)
                    # Queued writes go with the COMMIT, one round trip; they fail here, and
                    # the transaction is rolled back as for any other failure of ``work``.
                    await commit_with_queued(conn)
                mark_committed(conn)
        except BaseException:
            if tx is not None:
                await tx.run_hooks(committed=False)
            raise
        await tx.run_hooks(committed=True)
        return result


@contextlib.asynccontextmanager
async def _mapped_errors() -> AsyncIterator[None]:
    try:
        yield
    except IntegrityError as exc:
        # A unique key taken (an idempotency key two creates raced for): the services decide.
        raise DuplicateKeyError("a row with this key exists") from exc
    except DBAPIError as exc:
        if is_unavailable(exc):
            raise DatabaseUnavailableError("the database is unavailable, try again") from exc
        raise
    except OSError as exc:
        # A connect that fails below the driver (refused, reset) before any DBAPI wrapping.
        raise DatabaseUnavailableError("the database is unavailable, try again") from exc

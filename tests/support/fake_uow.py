"""An in-memory unit of work for the fast tests, in the style of cosmicpython's fake UoW.

Its stores (``fake_stores.py``, ``fake_accounts.py``) implement every port over dicts and interpret
the same lifecycle write table the SQL store compiles; budgets and model limits are real. A
transaction works on a copy of the state that replaces it on commit, so a failed unit of work
leaves nothing behind, and hooks and wake-ups follow the commit exactly as on SQL.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from scheduler_service.ports import Stores, Transaction, Wakeups
from tests.support.fake_accounts import (
    FakeGateStore,
    FakeModelKeyStore,
    FakeOutboxStore,
    FakeResultStore,
    FakeSpendStore,
)
from tests.support.fake_outputs import FakeOutputStore
from tests.support.fake_routes import FakeRouteStore
from tests.support.fake_state import FakeClock, FakeEvent, FakeState, FakeTables
from tests.support.fake_stores import FakeJobReads, FakeJobStore, FakeJobSweeps
from tests.support.fake_trees import FakeTreeStore
from tests.support.fake_warmups import FakeWarmupStore

__all__ = ["FakeClock", "FakeEvent", "FakeState", "FakeUnitOfWork"]

T = TypeVar("T")
S = TypeVar("S", bound=FakeTables)


class FakeUnitOfWork:
    """Commits by swapping in the transaction's copy of the state; ``commits`` counts them."""

    def __init__(
        self, *, wakeups: Wakeups | None = None, ttl_ms: int = 60_000, grace_ms: int = 30_000
    ) -> None:
        self.state = FakeState()
        self.clock = FakeClock()
        self._wakeups = wakeups or Wakeups()
        self._ttl_ms = ttl_ms
        self._grace_ms = grace_ms
        self.commits = 0

    @property
    def wakeups(self) -> Wakeups:
        return self._wakeups

    def _stores(self, state: FakeState) -> Stores:
        def on(store: type[S]) -> S:
            return store(state, self.clock, ttl_ms=self._ttl_ms, grace_ms=self._grace_ms)

        reads, keys, spend = on(FakeJobReads), on(FakeModelKeyStore), on(FakeSpendStore)
        return Stores(
            jobs=FakeJobStore(reads, keys, spend),
            reads=reads,
            sweeps=on(FakeJobSweeps),
            gates=on(FakeGateStore),
            keys=keys,
            spend=spend,
            results=on(FakeResultStore),
            outbox=on(FakeOutboxStore),
            outputs=on(FakeOutputStore),
            trees=FakeTreeStore(),
            warmups=on(FakeWarmupStore),
            routes=on(FakeRouteStore),
        )

    async def run(self, work: Callable[[Transaction], Awaitable[T]]) -> T:
        working = self.state.copy()
        tx = Transaction(self._stores(working), self._wakeups)
        try:
            result = await work(tx)
        except BaseException:
            await tx.run_hooks(committed=False)
            raise
        self.state = working
        self.commits += 1
        await tx.run_hooks(committed=True)
        return result

    async def read(self, query: Callable[[Transaction], Awaitable[T]]) -> T:
        tx = Transaction(self._stores(self.state.copy()), self._wakeups, writable=False)
        return await query(tx)

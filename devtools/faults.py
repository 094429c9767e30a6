"""``python -m devtools.faults [serve]``: the scheduler with the faults a chaos test asks for.

The product carries no fault-injection switch; a test that needs one starts the scheduler through
this module, which wraps the product's own methods before serving:

- ``AIJOB_TEST_FAULT_OUTBOX_STALL_MS``: hold claimed outbox events this long before delivering
  them (the claim and the delivery become two steps), so a test can kill the process in between;
- ``AIJOB_TEST_FAULT_REPORT_STALL_MS``: hold the answers of a committed report batch this long,
  so a test can kill the replica with acks in flight.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, ParamSpec, TypeVar

from scheduler_service.__main__ import main as scheduler_main
from scheduler_service.services.group_commit import GroupCommit
from scheduler_service.sql.outbox_dispatcher import OutboxDispatcher

__all__ = ["OUTBOX_STALL", "REPORT_STALL", "install"]

OUTBOX_STALL = "AIJOB_TEST_FAULT_OUTBOX_STALL_MS"
REPORT_STALL = "AIJOB_TEST_FAULT_REPORT_STALL_MS"

P = ParamSpec("P")
R = TypeVar("R")


def _stalling_after(
    method: Callable[P, Coroutine[Any, Any, R]], stall_s: float
) -> Callable[P, Coroutine[Any, Any, R]]:
    @functools.wraps(method)
    async def stalled(*args: P.args, **kwargs: P.kwargs) -> R:
        outcome = await method(*args, **kwargs)
        if outcome:  # something claimed or committed: an empty round has nothing to hold
            await asyncio.sleep(stall_s)
        return outcome

    return stalled


def install(env: Mapping[str, str]) -> None:
    """Wrap the product's methods with the faults ``env`` names (none: nothing changes)."""
    outbox_s = int(env.get(OUTBOX_STALL, "0")) / 1000
    report_s = int(env.get(REPORT_STALL, "0")) / 1000
    if outbox_s:
        original_init = OutboxDispatcher.__init__

        @functools.wraps(original_init)
        def two_steps(self: OutboxDispatcher, *args: Any, **kwargs: Any) -> None:
            original_init(self, *args, **kwargs)
            self._in_one_transaction = False  # the stall stands between claim and delivery

        OutboxDispatcher.__init__ = two_steps  # type: ignore[method-assign]
        OutboxDispatcher.claim = _stalling_after(  # type: ignore[method-assign]
            OutboxDispatcher.claim, outbox_s
        )
    if report_s:
        GroupCommit.apply = _stalling_after(GroupCommit.apply, report_s)  # type: ignore[method-assign]


if __name__ == "__main__":
    install(os.environ)
    sys.exit(scheduler_main(sys.argv[1:]))

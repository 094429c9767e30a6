"""Waiting for a condition that lives in another process or in the database."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


async def eventually(
    predicate: Callable[[], Awaitable[bool]], within_s: float = 60, every_s: float = 0.05
) -> None:
    """Return once ``predicate()`` holds; fail after ``within_s``.

    There is no event to await for state written by another process, so this polls it; the
    bound makes a condition that never comes true a failure rather than a hang.
    """

    async def poll() -> None:
        while not await predicate():  # noqa: ASYNC110 - polling state owned by another process
            await asyncio.sleep(every_s)

    await asyncio.wait_for(poll(), timeout=within_s)

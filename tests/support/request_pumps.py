"""grpc.aio's request pumps: the task that feeds a stream call's requests from its generator.

A pump still waiting once its call is over never finishes on its own; the garbage collector
destroys it later, in whichever test it runs, with an unraisable error there
(shared/poll_frames.py, ``end_requests``)."""

from __future__ import annotations

import asyncio
from typing import Any


def request_pumps(tasks: set[asyncio.Task[Any]]) -> list[asyncio.Task[Any]]:
    """Those of ``tasks`` that pump a stream call's requests and have not finished."""
    return [
        task
        for task in tasks
        if not task.done()
        and "_consume_request_iterator" in getattr(task.get_coro(), "__qualname__", "")
    ]

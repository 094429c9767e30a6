"""A fake scheduler that records what a runtime reports, and the scripted model in a thread."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from devtools.scripted_model import ScriptedModelServer
from runtime_service.failures import JobFailure
from runtime_service.pipeline import CallUsage, HeartbeatReply, LeaseInput, LeaseLost


@dataclass
class FakeScheduler:
    cancel_requested: bool = False
    lease_lost: bool = False
    user_key: str = "sk-user-key"
    heartbeats: list[int] = field(default_factory=list)
    #: Heartbeats that told of the attempt's first token.
    first_tokens: int = 0
    results: list[tuple[Any, CallUsage | None]] = field(default_factory=list)
    failures: list[tuple[JobFailure, CallUsage | None]] = field(default_factory=list)
    chunks: list[tuple[int, str]] = field(default_factory=list)

    async def heartbeat(
        self, lease: LeaseInput, progress: int, *, first_token: bool = False
    ) -> HeartbeatReply:
        self.heartbeats.append(progress)
        if first_token:
            self.first_tokens += 1
        if self.lease_lost:
            raise LeaseLost("LEASE_LOST")
        return HeartbeatReply(cancel_requested=self.cancel_requested)

    async def submit_result(self, lease: LeaseInput, output: Any, usage: CallUsage | None) -> None:
        self.results.append((output, usage))

    async def submit_failure(
        self, lease: LeaseInput, failure: JobFailure, usage: CallUsage | None
    ) -> None:
        self.failures.append((failure, usage))

    async def resolve_credential(self, lease: LeaseInput) -> str:
        return self.user_key

    async def send_chunk(self, lease: LeaseInput, offset: int, text: str) -> None:
        self.chunks.append((offset, text))


@contextlib.contextmanager
def running_model_server(**options: Any) -> Iterator[ScriptedModelServer]:
    """The scripted OpenAI-compatible server on a loopback port, in a thread."""
    server = ScriptedModelServer(**options)
    server.start_in_thread()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def lease(job_type: str = "synthetic_echo", **overrides: Any) -> LeaseInput:
    values: dict[str, Any] = {
        "job_id": "job-1",
        "job_type": job_type,
        "attempt_no": 1,
        "timeout_ms": 30_000,
        "snapshot": {"text": "hello"},
        "params": {},
        "prompt_key": job_type,
        "prompt_version": "v1",
        "credential_mode": "platform_key",
    }
    values.update(overrides)
    return LeaseInput(**values)

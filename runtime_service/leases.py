"""What a runtime holds and says about a job: its lease, the model's usage, and the scheduler as
the job's steps see it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from runtime_service.failures import JobFailure
from runtime_service.rate_limits import RateLimitHeaders

__all__ = [
    "CallUsage",
    "HeartbeatReply",
    "LeaseInput",
    "LeaseLost",
    "ModelConfig",
    "SchedulerClient",
]


class LeaseLost(Exception):
    """The scheduler says this runtime no longer holds the lease: stop without submitting."""


@dataclass(frozen=True, slots=True)
class LeaseInput:
    job_id: str
    job_type: str
    attempt_no: int
    timeout_ms: int
    snapshot: dict[str, Any]
    params: dict[str, Any]
    prompt_key: str
    prompt_version: str
    credential_mode: str
    #: The model the job's definition names; the runtime's AIJOB_MODEL_NAME only when empty (a
    #: scheduler that predates it), so the scheduler knows which model a lease will spend.
    model_name: str = ""
    output_schema_version: str = "v1"
    #: Proof of holding the lease, sent back with every report; never logged.
    lease_token: str = field(default="", repr=False)
    #: The answer's token cap (the job's definition): sent as ``max_tokens``, and what progress
    #: is measured against while the answer streams; 0: none sent.
    max_output_tokens: int = 0
    #: W3C traceparent of the job's CreateJob span: this attempt's spans join that trace.
    traceparent: str = ""
    #: The job's user as the provider is told of them (DeepSeek's ``user_id``): the
    #: scheduler's pseudonym, never the raw id; empty: none sent.
    provider_user_id: str = ""
    #: Text an earlier attempt wrote: this one continues it (prefix completion) instead of
    #: starting over; empty: start over.
    resume_output: str = field(default="", repr=False)
    #: The scheduler takes the answer's text as it is written (OutputChunk reports).
    stream_output: bool = False
    #: How much the model thinks (shared/reasoning.py): always said to the provider, whose
    #: default is to think.
    reasoning_effort: str = "off"
    #: Jobs wait to share the prompt's prefix: the first token is told at once.
    tell_first_token: bool = False
    #: Who serves ``model_name`` (runtime_service/providers.py; empty: DeepSeek), and the tier
    #: of the job type's model route the lease went to.
    model_provider: str = ""
    model_tier: str = ""


@dataclass
class CallUsage:
    model_name: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: int = 0
    cost_micros: int = 0
    #: What the provider's x-ratelimit-* headers said on the latest answer.
    rate_limits: RateLimitHeaders | None = None
    #: Time to the latest call's first token, in milliseconds; None before one arrived.
    time_to_first_token_ms: int | None = None
    #: Prompt tokens the provider served from its context cache.
    cached_prompt_tokens: int = 0
    #: Of the completion tokens, those the model spent reasoning.
    reasoning_tokens: int = 0


@dataclass(frozen=True, slots=True)
class HeartbeatReply:
    cancel_requested: bool


class SchedulerClient(Protocol):
    """What a job needs from the scheduler (the gRPC adapter, or a fake in tests)."""

    async def heartbeat(
        self, lease: LeaseInput, progress: int, *, first_token: bool = False
    ) -> HeartbeatReply: ...

    async def submit_result(
        self, lease: LeaseInput, output: Any, usage: CallUsage | None
    ) -> None: ...

    async def submit_failure(
        self, lease: LeaseInput, failure: JobFailure, usage: CallUsage | None
    ) -> None: ...

    async def resolve_credential(self, lease: LeaseInput) -> str: ...

    async def send_chunk(self, lease: LeaseInput, offset: int, text: str) -> None:
        """Store ``text`` at ``offset`` of the attempt's output; raises ChunkRefused when the
        scheduler will take no more of it."""
        ...


@dataclass(frozen=True, slots=True)
class ModelConfig:
    base_url: str
    model_name: str
    platform_key: str
    price_prompt_per_mtok_micros: int = 0
    price_completion_per_mtok_micros: int = 0
    #: Where chat prefix completion is served (DeepSeek: its beta base URL); empty: derived
    #: from ``base_url`` (``/v1`` becomes ``/beta``, else ``/beta`` is appended).
    prefix_base_url: str = ""

    @property
    def beta_base_url(self) -> str:
        if self.prefix_base_url:
            return self.prefix_base_url
        base = self.base_url.rstrip("/")
        return f"{base.removesuffix('/v1')}/beta"

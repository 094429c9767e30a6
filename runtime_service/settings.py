"""Runtime settings from the environment: prefix ``AIJOB_``; the key is DEEPSEEK_API_KEY."""

from __future__ import annotations

import os
import secrets
import socket
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from runtime_service.lanes import DEFAULT_QUEUE_SLOTS
from shared.config import DEV_TOKENS_FILE, comma_list, pattern_list
from shared.model_catalogue import DEFAULT_MODEL

DEEPSEEK_BASE_URL = "https://api.deepseek.com"


def _default_instance_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"[:100]


class RuntimeSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AIJOB_", extra="ignore", populate_by_name=True)

    scheduler_addr: str = "127.0.0.1:50051"
    runtime_token: SecretStr = SecretStr("")
    #: Read from this file when AIJOB_RUNTIME_TOKEN is unset (the scheduler's development tokens).
    dev_tokens_file: str = DEV_TOKENS_FILE
    runtime_instance_id: str = Field(default_factory=_default_instance_id)
    runtime_slots: int = Field(default=4, ge=1, le=1_000)
    #: Job types to serve; empty serves every type this runtime knows.
    runtime_job_types: Annotated[list[str], NoDecode] = Field(default_factory=list)
    #: ``off``: model calls carry no ``user_id``, even when the lease names one.
    provider_user_id: Literal["on", "off"] = "on"
    #: Queues whose jobs run at most this many at a time here (JSON, e.g. {"ai-analysis": 2}).
    runtime_queue_slots: dict[str, Annotated[int, Field(ge=1, le=1_000)]] = Field(
        default_factory=lambda: dict(DEFAULT_QUEUE_SLOTS)
    )
    deepseek_api_key: SecretStr = Field(
        default=SecretStr(""), validation_alias=AliasChoices("DEEPSEEK_API_KEY", "deepseek_api_key")
    )
    model_base_url: str = DEEPSEEK_BASE_URL
    model_name: str = DEFAULT_MODEL
    #: Where chat prefix completion is served (a resumed attempt's call); empty: the base URL
    #: with ``/beta`` for ``/v1`` (DeepSeek: https://api.deepseek.com/beta).
    model_prefix_base_url: str = ""
    #: A streaming answer's text goes to the scheduler at most this often (ms), for the job
    #: types that stream it (StreamOutput), or when a few hundred characters wait.
    output_chunk_ms: int = Field(default=250, ge=10, le=10_000)
    #: Seconds between heartbeats of a running job (progress; on the Poll stream the stream
    #: itself keeps the lease alive).
    heartbeat_s: float = Field(default=20.0, gt=0)
    #: Progress that moved (an answer streaming in) is reported at most this often.
    progress_every_s: float = Field(default=1.0, gt=0)
    #: A streaming answer that sends no token for this long, once tokens flowed, ends the
    #: attempt as MODEL_TIMEOUT (retryable) instead of waiting out the job's timeout.
    model_stall_s: float = Field(default=60.0, gt=0)
    #: A model call that receives no byte for this long (no token, no keep-alive) ends the
    #: attempt as MODEL_TIMEOUT: a connection that hangs is the provider failing, and its
    #: model key's circuit breaker counts it.
    model_silence_s: float = Field(default=120.0, gt=0)
    #: Seconds between keepalives on the Poll stream; keep it well under the scheduler's
    #: AIJOB_STREAM_ALIVE_S.
    stream_keepalive_s: float = Field(default=3.0, gt=0)
    #: Ask the scheduler for batched frames on the Poll stream (leases in LeaseBatch, acks in
    #: AckBatch) and send reports that are ready together in ReportBatch frames.
    stream_batch_frames: bool = True
    #: When several reports are ready at once, how long the frame waits for the rest of the
    #: burst before it goes (a lone report is never held).
    stream_frame_window_ms: float = Field(default=1.0, ge=0, le=50)
    #: Repair calls per attempt when the model's answer is not JSON or breaks the schema: the
    #: model is shown what was wrong. A budget of its own: repairs never spend attempts.
    schema_repairs: int = Field(default=1, ge=0, le=5)
    #: On SIGTERM, how long in-flight jobs may still finish before they are handed back.
    drain_grace_s: float = Field(default=30.0, ge=0)
    #: Price table, micro-units per million tokens (prompt, completion).
    price_prompt_per_mtok_micros: int = Field(default=270_000, ge=0)
    price_completion_per_mtok_micros: int = Field(default=1_100_000, ge=0)
    #: Content-safety patterns (regular expressions, comma-separated; a comma inside a pattern's
    #: braces, brackets or parentheses, or escaped as ``\\,``, stays in it); a hit blocks the job.
    content_safety_patterns: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: [
            r"(?i)\bhow to (make|build) (a )?(bomb|explosive)",
            r"(?i)\bcredit card number\b",
        ]
    )
    #: host:port of the Prometheus metrics endpoint; empty turns it off.
    metrics_listen: str = ""
    #: TLS to the scheduler: CA to trust, and a client certificate for mutual TLS.
    tls_ca: str = ""
    tls_client_cert: str = ""
    tls_client_key: str = ""

    @field_validator("runtime_job_types", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        return comma_list(value)

    @field_validator("content_safety_patterns", mode="before")
    @classmethod
    def _split_patterns(cls, value: object) -> object:
        return pattern_list(value)

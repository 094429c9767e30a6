"""Running one leased job: credential, prompt, model call, validation with one repair, safety,
hash, submit — with heartbeats, the job's timeout, and cancellation that stops the HTTP call.

Each step is a small function; ``JobRunner.run`` composes them and reports exactly one outcome
to the scheduler (a result, a failure, or nothing when the lease was lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import openai
from openai.types.chat import ChatCompletionMessageParam
from opentelemetry.trace import SpanKind
from pydantic import BaseModel

from runtime_service import metrics
from runtime_service.answers import (
    REPAIRABLE,
    STREAM_PROGRESS,
    ModelAnswer,
    cached_tokens,
    finished,
    output_schema,
    prompt_of,
    unfenced,
    unstalled,
    validated,
)
from runtime_service.failures import JobFailure, failure_from_openai
from runtime_service.lanes import DEFAULT_QUEUE_SLOTS, QueueLanes
from runtime_service.leases import (
    CallUsage,
    HeartbeatReply,
    LeaseInput,
    LeaseLost,
    ModelConfig,
    SchedulerClient,
)
from runtime_service.output_chunks import OutputChunks
from runtime_service.prompts import Prompt, repair_messages
from runtime_service.providers import ModelClients, ProviderConfig
from runtime_service.safety import SafetyCheck
from runtime_service.usage import saw_limits, with_call
from shared import tracing
from shared.canonical_json import canonical_json
from shared.error_codes import ErrorCode
from shared.job_types.reasoning import OFF, output_cap, thinking_options
from shared.model_catalogue import DEEPSEEK
from shared.redaction import scrub_secrets

__all__ = [
    "STREAM_PROGRESS",
    "CallUsage",
    "HeartbeatReply",
    "JobRunner",
    "LeaseInput",
    "LeaseLost",
    "ModelConfig",
    "SchedulerClient",
    "cached_tokens",
    "unfenced",
]

log = logging.getLogger(__name__)

#: The cap progress is measured against when the lease names none (the definitions' default).
DEFAULT_OUTPUT_CAP = 2_000


@dataclass
class _Running:
    task: asyncio.Task[Any] | None = None
    stop_reason: str = ""
    progress: int = 0
    usage: CallUsage | None = None
    #: The key this attempt called the model with, to scrub from what it reports.
    api_key: str = field(default="", repr=False)
    #: DeepSeek's ``user_id`` for every call of the attempt (repairs too); empty: none.
    provider_user_id: str = ""
    #: The answer's text on its way to the scheduler, for types that stream it.
    chunks: OutputChunks | None = None
    #: How much the model thinks, on every call of the attempt (repairs too).
    reasoning_effort: str = OFF
    #: Set when the attempt's first token arrives: the scheduler is told at once, so that
    #: jobs waiting to share the prompt's prefix may go.
    first_token: asyncio.Event = field(default_factory=asyncio.Event)


#: Why a job stopped when it was cancelled from outside, as the failure reported for it.
_STOPPED = {
    "shutdown": JobFailure(ErrorCode.RUNTIME_SHUTDOWN, "The runtime shut down.", "drained"),
    "cancelled": JobFailure(ErrorCode.CANCELLED, "The job was cancelled.", "cancel requested"),
}


class JobRunner:
    def __init__(
        self,
        scheduler: SchedulerClient,
        model: ModelConfig,
        safety: SafetyCheck,
        *,
        heartbeat_s: float = 20.0,
        schema_repairs: int = 1,
        progress_every_s: float = 1.0,
        stall_s: float = 60.0,
        queue_slots: Mapping[str, int] | None = None,
        send_user_id: bool = True,
        output_chunk_s: float = 0.25,
        clients: ModelClients | None = None,
    ) -> None:
        #: A streamed answer's text goes to the scheduler at most this often (or when a few
        #: hundred characters wait).
        self._output_chunk_s = output_chunk_s
        #: Whether calls carry the lease's pseudonymous user id (AIJOB_PROVIDER_USER_ID).
        self._send_user_id = send_user_id
        self._scheduler = scheduler
        self._lanes = QueueLanes(DEFAULT_QUEUE_SLOTS if queue_slots is None else queue_slots)
        self._schema_repairs = schema_repairs
        #: Progress that moved is reported at most this often (a heartbeat on the stream).
        self._progress_every_s = progress_every_s
        #: A streaming answer with no token for this long ends the attempt (MODEL_TIMEOUT).
        self._stall_s = stall_s
        self._model = model
        self._safety = safety
        self._heartbeat_s = heartbeat_s
        self._running: dict[tuple[str, int], _Running] = {}
        self._clients = clients or ModelClients(
            ProviderConfig(model.base_url, model.platform_key), {}
        )

    # -- control from outside -----------------------------------------------------------------

    def cancel(self, job_id: str, attempt_no: int, reason: str = "cancelled") -> bool:
        """Stop a running attempt now (a cancel pushed on the stream, or shutdown)."""
        running = self._running.get((job_id, attempt_no))
        if running is None:
            return False
        running.stop_reason = running.stop_reason or reason
        if running.task is not None:
            running.task.cancel()
        return True

    def in_flight(self) -> list[tuple[str, int]]:
        return list(self._running)

    async def close(self) -> None:
        await self._clients.close()

    # -- one job ------------------------------------------------------------------------------

    async def run(self, lease: LeaseInput) -> str:
        """Run ``lease`` to one reported outcome; returns what was reported, for logs and tests."""
        with tracing.span(
            "aijob.attempt",
            parent=tracing.context_of(lease.traceparent),
            kind=SpanKind.CONSUMER,
            attributes={
                "aijob.job_id": lease.job_id,
                "aijob.job_type": lease.job_type,
                "aijob.attempt": lease.attempt_no,
            },
        ) as span:
            outcome = await self._attempt(lease)
            span.set_attribute("aijob.outcome", outcome)
            return outcome

    async def _attempt(self, lease: LeaseInput) -> str:
        key = (lease.job_id, lease.attempt_no)
        running = _Running(
            provider_user_id=lease.provider_user_id if self._send_user_id else "",
            reasoning_effort=lease.reasoning_effort,
        )
        # Created inside the attempt's span: the task's context carries it to the model call.
        work = asyncio.ensure_future(self._execute(lease, running))
        running.task = work
        self._running[key] = running
        beats = asyncio.ensure_future(self._heartbeats(lease, running))
        context = {"jobId": lease.job_id, "attemptNo": lease.attempt_no}
        metrics.IN_FLIGHT.inc()
        outcome = "crashed"
        try:
            outcome = await self._run(lease, work, running, context)
            return outcome
        finally:
            metrics.IN_FLIGHT.dec()
            metrics.JOBS.labels(outcome).inc()
            beats.cancel()
            work.cancel()
            await asyncio.gather(beats, work, return_exceptions=True)
            if running.chunks is not None:
                running.chunks.stop()
            self._running.pop(key, None)

    async def _run(
        self,
        lease: LeaseInput,
        work: asyncio.Future[Any],
        running: _Running,
        context: dict[str, Any],
    ) -> str:
        try:
            try:
                async with asyncio.timeout(lease.timeout_ms / 1000):
                    output = await work
            except TimeoutError:
                work.cancel()
                raise JobFailure(
                    ErrorCode.JOB_TIMEOUT, "The job did not finish in time.", "job timeout"
                ) from None
            if running.chunks is not None:
                await running.chunks.flush()  # a caller's text is whole when the job ends
            await self._scheduler.submit_result(lease, output, running.usage)
            log.info("job succeeded", extra={"action": "job_succeeded", **context})
            return "succeeded"
        except asyncio.CancelledError:
            if running.stop_reason == "lease_lost":
                log.warning("lease lost: job stopped", extra={"action": "lease_lost", **context})
                return "lease_lost"
            if running.stop_reason == "shutdown":
                failure = JobFailure(
                    ErrorCode.RUNTIME_SHUTDOWN, "The runtime shut down.", "drained"
                )
            elif running.stop_reason == "cancelled":
                failure = JobFailure(
                    ErrorCode.CANCELLED, "The job was cancelled.", "cancel requested"
                )
            else:
                raise
            return await self._report(lease, failure, running, context)
        except JobFailure as failure:
            return await self._report(lease, failure, running, context)
        except LeaseLost:
            log.warning("lease lost: job stopped", extra={"action": "lease_lost", **context})
            return "lease_lost"
        except Exception as exc:
            log.error("job crashed", exc_info=exc, extra={"action": "job_crashed", **context})
            crashed = JobFailure(
                ErrorCode.INTERNAL_ERROR, "The runtime failed.", type(exc).__name__
            )
            return await self._report(lease, crashed, running, context)

    async def _report(
        self, lease: LeaseInput, failure: JobFailure, running: _Running, context: dict[str, Any]
    ) -> str:
        metrics.ERRORS.labels(failure.code.value).inc()
        if running.chunks is not None:
            await running.chunks.flush()  # all the text there is, for the next attempt
        failure.internal_message = scrub_secrets(
            failure.internal_message, (running.api_key, self._model.platform_key or "")
        )
        try:
            await self._scheduler.submit_failure(lease, failure, running.usage)
        except LeaseLost:
            return "lease_lost"
        log.info(
            "job failed",
            extra={
                "action": "job_failed",
                "errorCode": failure.code.value,
                "retryable": failure.retryable,
                **context,
            },
        )
        return failure.code.value

    async def _heartbeats(self, lease: LeaseInput, running: _Running) -> None:
        """A heartbeat every ``heartbeat_s``, and sooner — at most once per
        ``progress_every_s`` — when progress moved, so a watcher sees an answer stream in."""
        loop = asyncio.get_running_loop()
        sent, beat_at, told = 0, loop.time(), not lease.tell_first_token
        tick = min(self._heartbeat_s, self._progress_every_s)
        while True:
            if told:
                await asyncio.sleep(tick)
            else:  # the first token is told at once
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(running.first_token.wait(), tick)
            first = running.first_token.is_set() and not told
            if not first and running.progress == sent and loop.time() - beat_at < self._heartbeat_s:
                continue
            sent, beat_at = running.progress, loop.time()
            try:
                reply = await self._scheduler.heartbeat(lease, sent, first_token=first)
                told = told or first
            except LeaseLost:
                running.stop_reason = "lease_lost"
                if running.task is not None:
                    running.task.cancel()
                return
            except Exception as exc:
                # A failed heartbeat is retried at the next beat; the lease has its grace period.
                # The error's type and gRPC code only: its text may quote the request.
                code = getattr(exc, "code", None)
                log.warning(
                    "heartbeat failed",
                    extra={
                        "action": "heartbeat_error",
                        "jobId": lease.job_id,
                        "error": type(exc).__name__,
                        "code": code().name if callable(code) else None,
                    },
                )
                continue
            if reply.cancel_requested:
                running.stop_reason = running.stop_reason or "cancelled"
                if running.task is not None:
                    running.task.cancel()
                return

    async def _execute(self, lease: LeaseInput, running: _Running) -> Any:
        async with self._lanes.lane(lease.job_type):
            return await self._answer(lease, running)

    async def _answer(self, lease: LeaseInput, running: _Running) -> Any:
        schema = output_schema(lease)
        self._check_safety(json.dumps(lease.snapshot, ensure_ascii=False), "input")
        client, owned = await self._clients.for_lease(lease, self._scheduler.resolve_credential)
        running.api_key = client.api_key
        try:
            prompt = prompt_of(lease, schema)
            running.progress = STREAM_PROGRESS[0]
            model = lease.model_name or self._model.model_name
            running.chunks = self._output_chunks(lease)
            answer = await self._call(client, model, prompt.messages, running, lease)
            running.progress = 60
            validated = await self._validated(
                client, prompt, schema, answer, model=model, running=running
            )
            running.progress = 90
            output = validated.model_dump(mode="json", exclude_none=True)
            self._check_safety(canonical_json(output).decode(), "output")
            return output
        finally:
            if owned:
                await client.close()

    async def _validated(
        self,
        client: openai.AsyncOpenAI,
        prompt: Prompt,
        schema: type[BaseModel],
        answer: str,
        *,
        model: str,
        running: _Running,
    ) -> BaseModel:
        """The answer validated, after at most ``schema_repairs`` repair calls that show the
        model what was wrong; then the last validation failure (retryable)."""
        for _ in range(self._schema_repairs):
            try:
                return validated(schema, answer)
            except JobFailure as failure:
                if failure.code not in REPAIRABLE:
                    raise
                repair = repair_messages(prompt, answer, failure.internal_message)
                answer = await self._call(client, model, repair, running, None)
        return validated(schema, answer)

    def _output_chunks(self, lease: LeaseInput) -> OutputChunks | None:
        """The sender of the answer's text as it is written, when the lease asks for it (the job
        types that stream it, on a scheduler that stores it); a resumed attempt's text starts
        with what the attempt before it wrote."""
        if not lease.stream_output:
            return None
        chunks = OutputChunks(
            functools.partial(self._scheduler.send_chunk, lease), every_s=self._output_chunk_s
        )
        chunks.write(lease.resume_output)
        return chunks

    def _check_safety(self, text: str, where: str) -> None:
        rule = self._safety.violation(text)
        if rule is not None:
            raise JobFailure(
                ErrorCode.CONTENT_SAFETY_BLOCKED,
                "The content was blocked by the safety check.",
                f"{where} matched {rule}",
            )

    async def _call(
        self,
        client: openai.AsyncOpenAI,
        model: str,
        messages: list[dict[str, Any]],
        running: _Running,
        lease: LeaseInput | None,
    ) -> str:
        """One model call, streamed: the answer is the same, the time to its first token — what
        grows first when a provider holds requests under load — is seen and reported, progress
        follows the tokens (``lease``'s call; a repair call leaves progress where it is), and a
        stream that stops sending tokens ends the attempt before the job's timeout."""
        with tracing.span(
            "aijob.model_call", kind=SpanKind.CLIENT, attributes={"gen_ai.request.model": model}
        ) as span:
            answer_text = await self._traced_call(client, model, messages, running, lease)
            usage = running.usage
            if usage is not None:
                span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
                if usage.time_to_first_token_ms is not None:
                    span.set_attribute("aijob.time_to_first_token_ms", usage.time_to_first_token_ms)
            return answer_text

    async def _traced_call(
        self,
        client: openai.AsyncOpenAI,
        model: str,
        messages: list[dict[str, Any]],
        running: _Running,
        lease: LeaseInput | None,
    ) -> str:
        started = time.perf_counter()
        answer = ModelAnswer(model)
        cap = lease.max_output_tokens if lease is not None else 0
        limit = output_cap(cap, running.reasoning_effort)
        extra: dict[str, Any] = {"max_tokens": limit} if limit > 0 else {}
        # Neither is an OpenAI parameter: DeepSeek reads them from the body (extra_body). The
        # thinking toggle is always sent, since the provider's default is to think.
        body: dict[str, Any] = thinking_options(running.reasoning_effort)
        if running.provider_user_id:
            body["user_id"] = running.provider_user_id
        extra["extra_body"] = body
        # Prefix completion is DeepSeek's beta: on another provider the attempt starts over.
        resumes = lease is not None and ModelClients.provider_of(lease) == DEEPSEEK
        prefix = lease.resume_output if lease is not None and resumes else ""
        if prefix:
            # Chat prefix completion (DeepSeek's beta): the answer goes on from the text the
            # attempt before this one wrote, rather than from nothing.
            client = client.with_options(base_url=self._model.beta_base_url)
            messages = [*messages, {"role": "assistant", "content": prefix, "prefix": True}]
            answer.resume_from(prefix)
        else:
            extra["response_format"] = {"type": "json_object"}
        streamed = running.chunks if lease is not None else None
        try:
            raw = await client.chat.completions.with_raw_response.create(
                model=model,
                messages=cast("list[ChatCompletionMessageParam]", messages),
                stream=True,
                stream_options={"include_usage": True},
                **extra,
            )
            stream = raw.parse()
            try:
                async for chunk in unstalled(stream, answer, self._stall_s):
                    text = answer.take(chunk, time.perf_counter() - started)
                    if answer.first_token_s is not None:
                        running.first_token.set()
                    if lease is not None:
                        running.progress = max(
                            running.progress, answer.progress(cap or DEFAULT_OUTPUT_CAP)
                        )
                    if streamed is not None:
                        streamed.write(text)
            finally:
                await stream.close()  # a stalled or cancelled answer gives its connection back
        except JobFailure:  # a stalled answer: still a call, with its time and tokens so far
            self._add_usage(running, answer, time.perf_counter() - started, model)
            raise
        except openai.OpenAIError as error:
            # A failed call is still a call: it took time and is recorded as usage.
            self._add_usage(running, answer, time.perf_counter() - started, model)
            if isinstance(error, openai.APIStatusError):
                saw_limits(running.usage, error.response.headers)
            raise failure_from_openai(error) from None
        self._add_usage(running, answer, time.perf_counter() - started, model)
        saw_limits(running.usage, raw.headers)
        return finished(answer)

    def _add_usage(
        self, running: _Running, completion: ModelAnswer, elapsed_s: float, model: str
    ) -> None:
        running.usage = with_call(running.usage, completion, elapsed_s, model, self._model)

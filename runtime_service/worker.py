"""The runtime process: one Poll stream to a scheduler, each lease run as an asyncio task.

Slots go back to the scheduler as ``credit`` when a job is reported. Results, failures and
progress go on the stream too (each acked, applied by the scheduler in group commits), with
a keepalive every few seconds that keeps every lease of this runtime alive. When the stream or the
scheduler goes away it reconnects with backoff, naming the leases it still runs; in-flight jobs
carry on, reporting through unary calls until the stream is back.
On SIGTERM it drains: the stream closes (the scheduler gives back leases it had not delivered),
in-flight jobs get ``drain_grace_s`` to finish, the rest are reported as retryable
RUNTIME_SHUTDOWN failures, and the process exits 0.
By default the stream carries batched frames (``shared.poll_frames``): leases, reports, acks and
credits that are ready together travel in one message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator

import grpc

from runtime_service import metrics
from runtime_service.pipeline import JobRunner, ModelConfig
from runtime_service.providers import ModelClients, ProviderConfig, providers_from_env
from runtime_service.safety import PatternSafetyCheck
from runtime_service.scheduler_client import GrpcSchedulerClient, lease_input
from runtime_service.settings import RuntimeSettings
from shared.config import client_channel, dev_token
from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.gen.aijob.v1 import types_pb2
from shared.job_schemas import OUTPUT_SCHEMAS
from shared.poll_frames import end_requests, outgoing_frames, outgoing_messages

__all__ = ["Runtime", "known_job_types", "runtime_token"]

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 10.0


def known_job_types() -> list[str]:
    return sorted({job_type for job_type, _version in OUTPUT_SCHEMAS})


def runtime_token(settings: RuntimeSettings) -> str:
    token = settings.runtime_token.get_secret_value() or dev_token(
        settings.dev_tokens_file, "runtime"
    )
    if not token:
        raise SystemExit("no runtime token: set AIJOB_RUNTIME_TOKEN")
    return token


def _channel(settings: RuntimeSettings) -> grpc.aio.Channel:
    return client_channel(
        settings.scheduler_addr,
        ca=settings.tls_ca,
        client_cert=settings.tls_client_cert,
        client_key=settings.tls_client_key,
        options=[("grpc.keepalive_time_ms", 30_000), ("grpc.keepalive_timeout_ms", 10_000)],
    )


class Runtime:
    def __init__(self, settings: RuntimeSettings) -> None:
        self.settings = settings
        self.job_types = settings.runtime_job_types or known_job_types()
        self._channel = _channel(settings)
        self._client = GrpcSchedulerClient(
            self._channel, runtime_token(settings), settings.runtime_instance_id
        )
        self.runner = JobRunner(
            self._client,
            ModelConfig(
                base_url=settings.model_base_url,
                model_name=settings.model_name,
                platform_key=settings.deepseek_api_key.get_secret_value(),
                price_prompt_per_mtok_micros=settings.price_prompt_per_mtok_micros,
                price_completion_per_mtok_micros=settings.price_completion_per_mtok_micros,
                prefix_base_url=settings.model_prefix_base_url,
            ),
            PatternSafetyCheck(settings.content_safety_patterns),
            heartbeat_s=settings.heartbeat_s,
            progress_every_s=settings.progress_every_s,
            stall_s=settings.model_stall_s,
            schema_repairs=settings.schema_repairs,
            queue_slots=settings.runtime_queue_slots,
            output_chunk_s=settings.output_chunk_ms / 1000,
            send_user_id=settings.provider_user_id == "on",
            clients=ModelClients(
                ProviderConfig(
                    settings.model_base_url, settings.deepseek_api_key.get_secret_value()
                ),
                providers_from_env(os.environ),
                silence_s=settings.model_silence_s,
            ),
        )
        self._tasks: set[asyncio.Task[str]] = set()
        self._outgoing: asyncio.Queue[rt.PollRequest] | None = None
        self.connected = False

    async def run(self, stop: asyncio.Event) -> None:
        backoff = 0.2
        while not stop.is_set():
            try:
                await self._session(stop)
                backoff = 0.2
            except grpc.aio.AioRpcError as error:
                log.warning(
                    "poll stream ended; reconnecting",
                    extra={
                        "action": "poll_reconnect",
                        "code": error.code().name,
                        "backoffS": backoff,
                    },
                )
            self.connected = False
            metrics.CONNECTED.set(0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)
        await self._drain()
        await self.runner.close()
        await self._channel.close(None)

    async def _session(self, stop: asyncio.Event) -> None:
        free = self.settings.runtime_slots - len(self._tasks)
        while free < 1 and not stop.is_set():  # every slot busy: reconnect once one frees up
            await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
            free = self.settings.runtime_slots - len(self._tasks)
        outgoing: asyncio.Queue[rt.PollRequest] = asyncio.Queue()
        self._outgoing = outgoing
        call = self._client.stub.Poll(
            self._requests(free, outgoing), metadata=self._client.metadata
        )
        self._client.stream.attach(outgoing)
        stopper = asyncio.ensure_future(stop.wait())
        reader = asyncio.ensure_future(self._read(call))
        keepalive = asyncio.ensure_future(self._keepalives(outgoing))
        try:
            await asyncio.wait({stopper, reader}, return_when=asyncio.FIRST_COMPLETED)
            if reader.done():
                reader.result()  # raises the stream's error, if any
        finally:
            self._outgoing = None
            self._client.stream.detach()
            end_requests(outgoing)
            call.cancel()
            for task in (stopper, reader, keepalive):
                task.cancel()
            await asyncio.gather(stopper, reader, keepalive, return_exceptions=True)

    async def _keepalives(self, outgoing: asyncio.Queue[rt.PollRequest]) -> None:
        while True:
            await asyncio.sleep(self.settings.stream_keepalive_s)
            outgoing.put_nowait(rt.PollRequest(keepalive=rt.PollKeepalive()))

    async def _requests(
        self, slots: int, outgoing: asyncio.Queue[rt.PollRequest]
    ) -> AsyncIterator[rt.PollRequest]:
        held = [rt.LeaseRef(job_id=j, attempt_no=a) for j, a in self.runner.in_flight()]
        yield rt.PollRequest(
            subscribe=rt.PollSubscribe(
                runtime_instance_id=self.settings.runtime_instance_id,
                job_types=self.job_types,
                slots=slots,
                held=held,
                batch_frames=self.settings.stream_batch_frames,
            )
        )
        if self.settings.stream_batch_frames:
            window_s = self.settings.stream_frame_window_ms / 1000
            async for frame in outgoing_frames(outgoing, window_s=window_s):
                yield frame
        else:
            async for message in outgoing_messages(outgoing):
                yield message

    async def _read(self, call: grpc.aio.StreamStreamCall[rt.PollRequest, rt.PollResponse]) -> None:
        log.info(
            "connected",
            extra={"action": "poll_connected", "runtimeId": self.settings.runtime_instance_id},
        )
        self.connected = True
        metrics.CONNECTED.set(1)
        async for message in call:
            self._on_message(message)

    def _on_message(self, message: rt.PollResponse) -> None:
        match message.WhichOneof("kind"):
            case "lease":
                self._start(message.lease)
            case "lease_batch":
                for lease in message.lease_batch.leases:
                    self._start(lease)
            case "cancel":
                self.runner.cancel(message.cancel.job_id, message.cancel.attempt_no)
            case "ack":
                self._client.stream.acked(message.ack)
            case "ack_batch":
                for ack in message.ack_batch.acks:
                    self._client.stream.acked(ack)
            case kind:
                # A kind this runtime does not know (a newer scheduler): refused, never guessed at.
                log.warning(
                    "unknown Poll message refused",
                    extra={"action": "poll_unknown_message", "kind": str(kind)},
                )

    def _start(self, lease: types_pb2.Lease) -> None:
        task = asyncio.ensure_future(self.runner.run(lease_input(lease)))
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[str]) -> None:
        self._tasks.discard(task)
        if self._outgoing is not None:
            self._outgoing.put_nowait(rt.PollRequest(credit=rt.PollCredit(slots=1)))

    async def _drain(self) -> None:
        if not self._tasks:
            return
        log.info("draining", extra={"action": "drain", "inFlight": len(self._tasks)})
        _done, pending = await asyncio.wait(set(self._tasks), timeout=self.settings.drain_grace_s)
        if pending:
            for job_id, attempt_no in self.runner.in_flight():
                self.runner.cancel(job_id, attempt_no, reason="shutdown")
            await asyncio.wait(pending, timeout=30)

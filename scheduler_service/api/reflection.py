"""Server reflection that teaches: the API's descriptors (``protos/``) are served with their
comments, and methods are found by name.

grpcio-reflection serves descriptors rebuilt from the generated modules, which protoc writes
without source info, so ``grpcurl describe`` shows no comments; and looking up a method's file by
the method's full name fails (grpc/grpc#34743, "Symbol not found"). This servicer serves each file
from the descriptor set ``make proto`` writes with source info (``shared/gen/aijob.protoset``),
and finds a method through its service.

Reflection needs no token, and one request can ask for every file the API has: 50 anonymous
streams pipelining requests could draw gigabytes of answers in seconds. Requests are rate-limited
for the whole server (a token bucket: ``AIJOB_REFLECTION_RATE_PER_S``, bursts of ``..._BURST``),
far above what grpcurl's ``list`` and ``describe`` need; a stream over the rate ends
RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha._async import ReflectionServicer

from scheduler_service.core.errors import LimitExceededError
from shared.error_codes import ErrorCode

__all__ = ["PROTOSET", "DocumentedReflection", "TokenBucket"]

PROTOSET = Path(__file__).resolve().parents[2] / "shared" / "gen" / "aijob.protoset"


def _not_found(request: Any) -> reflection_pb2.ServerReflectionResponse:
    return reflection_pb2.ServerReflectionResponse(
        error_response=reflection_pb2.ErrorResponse(
            error_code=grpc.StatusCode.NOT_FOUND.value[0], error_message="not found"
        ),
        original_request=request,
    )


class TokenBucket:
    """``rate_per_s`` requests a second on average, ``burst`` at once. Pure but for the clock."""

    def __init__(
        self, rate_per_s: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._rate = rate_per_s
        self._burst = float(burst)
        self._tokens = float(burst)
        self._clock = clock
        self._at = clock()

    def take(self) -> bool:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


class DocumentedReflection(ReflectionServicer):  # type: ignore[misc]
    def __init__(
        self,
        service_names: Iterable[str],
        protoset: Path = PROTOSET,
        *,
        bucket: TokenBucket | None = None,
    ) -> None:
        super().__init__(service_names)
        self._bucket = bucket or TokenBucket(rate_per_s=50, burst=200)
        files = descriptor_pb2.FileDescriptorSet.FromString(protoset.read_bytes()).file
        #: File name -> its FileDescriptorProto with comments, serialized.
        self._documented = {f.name: f.SerializeToString() for f in files}

    async def ServerReflectionInfo(
        self, request_iterator: AsyncIterable[Any], context: Any
    ) -> AsyncIterator[Any]:
        async for response in super().ServerReflectionInfo(
            self._metered(request_iterator), context
        ):
            yield response

    async def _metered(self, requests: AsyncIterable[Any]) -> AsyncIterator[Any]:
        async for request in requests:
            if not self._bucket.take():
                raise LimitExceededError(
                    ErrorCode.QUOTA_EXCEEDED,
                    "reflection requests are over this server's rate; retry later",
                )
            yield request

    def _file_by_filename(self, request: Any, filename: str) -> Any:
        try:
            descriptor = self._pool.FindFileByName(filename)
        except KeyError:
            return _not_found(request)
        return self._files(descriptor, request)

    def _file_containing_symbol(self, request: Any, name: str) -> Any:
        try:
            descriptor = self._pool.FindFileContainingSymbol(name)
        except KeyError:
            service, _, method = name.rpartition(".")
            try:
                found = self._pool.FindServiceByName(service)
            except KeyError:
                return _not_found(request)
            if method not in found.methods_by_name:
                return _not_found(request)
            descriptor = found.file
        return self._files(descriptor, request)

    def _files(self, descriptor: Any, request: Any) -> reflection_pb2.ServerReflectionResponse:
        """The file and every file it imports, documented where the descriptor set has it."""
        seen: dict[str, Any] = {}
        pending = [descriptor]
        while pending:
            current = pending.pop()
            if current.name in seen:
                continue
            seen[current.name] = current
            pending.extend(current.dependencies)
        serialized = []
        for name, file in seen.items():
            documented = self._documented.get(name)
            if documented is None:
                proto = descriptor_pb2.FileDescriptorProto()
                file.CopyToProto(proto)
                documented = proto.SerializeToString()
            serialized.append(documented)
        return reflection_pb2.ServerReflectionResponse(
            file_descriptor_response=reflection_pb2.FileDescriptorResponse(
                file_descriptor_proto=serialized
            ),
            original_request=request,
        )

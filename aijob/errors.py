"""The errors the engine's client raises: one class per gRPC status a caller can act on, each
with the public error code (``ErrorInfo.reason``) and its metadata, built from a failed call's
status details."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import grpc
from google.rpc import error_details_pb2, status_pb2

__all__ = [
    "AijobError",
    "AlreadyExistsError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "UnauthenticatedError",
    "UnavailableError",
    "error_details",
    "error_of",
]


class AijobError(Exception):
    """A call the engine refused or could not answer."""

    def __init__(
        self, code: grpc.StatusCode, reason: str, message: str, metadata: Mapping[str, str]
    ) -> None:
        # The reason adds to the status only when it says more (INVALID_ARGUMENT is both).
        said = f"{code.name} {reason}" if reason and reason != code.name else code.name
        super().__init__(f"{said}: {message}")
        #: The gRPC status.
        self.code = code
        #: The public error code (``ErrorInfo.reason``), e.g. ``JOB_NOT_FOUND``; "" when none.
        self.reason = reason
        self.message = message
        #: ``ErrorInfo.metadata``: e.g. ``field`` for an invalid argument.
        self.metadata = dict(metadata)


class InvalidArgumentError(AijobError): ...


class NotFoundError(AijobError): ...


class AlreadyExistsError(AijobError): ...


class FailedPreconditionError(AijobError): ...


class ResourceExhaustedError(AijobError): ...


class PermissionDeniedError(AijobError): ...


class UnauthenticatedError(AijobError): ...


class UnavailableError(AijobError): ...


class DeadlineExceededError(AijobError): ...


class InternalError(AijobError): ...


_CLASSES: dict[grpc.StatusCode, type[AijobError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
}


def error_details(error: grpc.aio.AioRpcError) -> tuple[str, dict[str, str], float | None]:
    """(reason, metadata, the server's retry delay) from an error's status details."""
    reason, metadata, delay = "", {}, None
    trailing = cast(tuple[tuple[str, Any], ...], error.trailing_metadata() or ())
    for key, value in trailing:
        if key != "grpc-status-details-bin" or not isinstance(value, bytes):
            continue
        for detail in status_pb2.Status.FromString(value).details:
            info, retry = error_details_pb2.ErrorInfo(), error_details_pb2.RetryInfo()
            if detail.Unpack(info):
                reason, metadata = info.reason, dict(info.metadata)
            elif detail.Unpack(retry):
                delay = retry.retry_delay.ToTimedelta().total_seconds()
    return reason, metadata, delay


def error_of(error: grpc.aio.AioRpcError) -> AijobError:
    """The exception for ``error``."""
    reason, metadata, _ = error_details(error)
    kind = _CLASSES.get(error.code(), InternalError)
    return kind(error.code(), reason, error.details() or "", metadata)

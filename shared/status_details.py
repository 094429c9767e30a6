"""Reading the public error code from a gRPC error (``google.rpc.ErrorInfo`` in the details)."""

from __future__ import annotations

from typing import Any, cast

import grpc
from google.rpc import error_details_pb2, status_pb2

__all__ = ["error_from_status", "error_reason", "status_reason"]


def error_from_status(status: status_pb2.Status) -> grpc.aio.AioRpcError:
    """The error a unary call would have raised with ``status`` (a report's ack on a stream)."""
    code = next((c for c in grpc.StatusCode if c.value[0] == status.code), grpc.StatusCode.UNKNOWN)
    trailing = grpc.aio.Metadata(("grpc-status-details-bin", status.SerializeToString()))
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailing, status.message, None)


def error_reason(error: grpc.aio.AioRpcError) -> str:
    """The ``ErrorInfo.reason`` of ``error`` (e.g. "LEASE_LOST"), or "" when it carries none."""
    metadata = cast(tuple[tuple[str, Any], ...], error.trailing_metadata() or ())
    for key, value in metadata:
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            return status_reason(status_pb2.Status.FromString(value))
    return ""


def status_reason(status: status_pb2.Status) -> str:
    """The ``ErrorInfo.reason`` in ``status``'s details (a CreateJobs item's, an ack's), or ""."""
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return str(info.reason)
    return ""

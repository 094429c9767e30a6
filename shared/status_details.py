"""Reading the public error code from a gRPC error (``google.rpc.ErrorInfo`` in the details)."""

from __future__ import annotations

from typing import Any, cast

import grpc
from google.rpc import error_details_pb2, status_pb2

__all__ = ["error_reason"]


def error_reason(error: grpc.aio.AioRpcError) -> str:
    """The ``ErrorInfo.reason`` of ``error`` (e.g. "LEASE_LOST"), or "" when it carries none."""
    metadata = cast(tuple[tuple[str, Any], ...], error.trailing_metadata() or ())
    for key, value in metadata:
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            for detail in status_pb2.Status.FromString(value).details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return str(info.reason)
    return ""

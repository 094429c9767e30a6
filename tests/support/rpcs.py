"""Every RPC of the contract, by service: its generated modules and the role its token needs."""

from __future__ import annotations

from typing import Any

from devtools.harness import tokens
from scheduler_service.api.auth import Role
from shared.gen.aijob.v1 import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    job_service_pb2,
    job_service_pb2_grpc,
    runtime_service_pb2,
    runtime_service_pb2_grpc,
)

__all__ = ["SERVICES", "TOKEN_OF", "every_rpc", "message_class"]

SERVICES = {
    "JobService": (job_service_pb2, job_service_pb2_grpc, Role.SERVICE),
    "AdminService": (admin_service_pb2, admin_service_pb2_grpc, Role.ADMIN),
    "RuntimeService": (runtime_service_pb2, runtime_service_pb2_grpc, Role.RUNTIME),
}
TOKEN_OF = {
    Role.RUNTIME: tokens.RUNTIME_TOKEN,
    Role.SERVICE: tokens.SERVICE_TOKEN,
    Role.ADMIN: tokens.ADMIN_TOKEN,
}


def every_rpc() -> list[tuple[str, str]]:
    """(service, method) of every RPC the contract has."""
    found = []
    for service, (pb2, _grpc, _role) in SERVICES.items():
        descriptor = pb2.DESCRIPTOR.services_by_name[service]
        found += [(service, method.name) for method in descriptor.methods]
    return found


def message_class(full_name: str) -> Any:
    """The generated class of a message by its full name (for types another file defines)."""
    from google.protobuf import symbol_database

    return symbol_database.Default().GetSymbol(full_name)

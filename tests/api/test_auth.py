"""Every RPC of every service, with no token, an unknown token and each wrong role; health and
reflection stay open; development tokens on loopback; TLS and mutual TLS."""

from __future__ import annotations

import datetime
import json
import os
import stat
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devtools.harness import tokens
from scheduler_service.api.auth import Role, TokenSet
from scheduler_service.api.tokens import ConfigurationError, is_loopback, load_tokens
from scheduler_service.wiring.settings import SchedulerSettings
from shared.status_details import error_reason
from tests.support.rpcs import SERVICES, TOKEN_OF, every_rpc, message_class
from tests.support.schedulers import SchedulerFactory


async def _call(
    channel: grpc.aio.Channel, service: str, method: str, metadata: Any, *, refused: bool = True
) -> grpc.aio.AioRpcError | None:
    """The error the call ended with, or None when it succeeded.

    A stream the server is expected to refuse gets no message from us: grpc.aio reports a client
    write that meets the server's close as INTERNAL ("Internal error from Core") in place of the
    server's answer (grpc/grpc#36066), and the refusal does not wait for one."""
    pb2, pb2_grpc, _ = SERVICES[service]
    descriptor = pb2.DESCRIPTOR.services_by_name[service].methods_by_name[method]
    stub = getattr(pb2_grpc, f"{service}Stub")(channel)
    request_class = getattr(pb2, descriptor.input_type.name, None) or message_class(
        descriptor.input_type.full_name
    )
    request = request_class()
    rpc = getattr(stub, method)
    try:
        if descriptor.client_streaming and refused:
            call = rpc(metadata=metadata, timeout=10)
        elif descriptor.client_streaming:

            async def requests() -> Any:
                yield request

            call = rpc(requests(), metadata=metadata, timeout=10)
        else:
            call = rpc(request, metadata=metadata, timeout=10)
        if descriptor.server_streaming:
            async for _ in call:
                break  # a first message is enough: the call was let through
        else:
            await call
    except grpc.aio.AioRpcError as error:
        return error
    return None


@pytest.mark.mysql
async def test_every_rpc_refuses_missing_unknown_and_wrong_role_tokens(
    mysql_url: str, start_scheduler: SchedulerFactory
) -> None:
    scheduler = await start_scheduler(mysql_url)
    rpcs = every_rpc()
    assert len(rpcs) == 39
    async with grpc.aio.insecure_channel(scheduler.address) as channel:
        for service, method in rpcs:
            required = SERVICES[service][2]
            cases: list[tuple[Any, grpc.StatusCode, str]] = [
                ((), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"),
                (tokens.bearer("not-a-token"), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"),
                (
                    (("authorization", f"Basic {TOKEN_OF[required]}"),),
                    grpc.StatusCode.UNAUTHENTICATED,
                    "UNAUTHENTICATED",
                ),
            ]
            cases += [
                (
                    tokens.bearer(TOKEN_OF[role]),
                    grpc.StatusCode.PERMISSION_DENIED,
                    "PERMISSION_DENIED",
                )
                for role in TOKEN_OF
                if role is not required
            ]
            for metadata, code, reason in cases:
                error = await _call(channel, service, method, (*metadata, ("x-user-id", "u")))
                assert error is not None, (service, method, metadata)
                assert (error.code(), error_reason(error)) == (code, reason), (service, method)
                if metadata == tokens.bearer(TOKEN_OF[Role.ADMIN]):
                    assert (error.details() or "").startswith("an admin token cannot call")
            # The right token gets the call past authentication (it may still fail on its input).
            error = await _call(
                channel,
                service,
                method,
                (*tokens.bearer(TOKEN_OF[required]), ("x-user-id", "u")),
                refused=False,
            )
            refused = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)
            assert error is None or error.code() not in refused, (service, method)
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert health.status == health_pb2.HealthCheckResponse.SERVING


def test_tokens_compare_by_role() -> None:
    token_set = TokenSet({Role.SERVICE: ["s1", "s2"], Role.ADMIN: ["a1"]})
    assert token_set.role_of("s2") is Role.SERVICE
    assert token_set.role_of("a1") is Role.ADMIN
    assert token_set.role_of("s") is None and token_set.role_of("") is None


def test_development_tokens_on_loopback_only(tmp_path: Path) -> None:
    path = tmp_path / "state" / "dev-tokens.json"
    first = load_tokens(SchedulerSettings(listen="127.0.0.1:50051", dev_tokens_file=str(path)))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    written = json.loads(path.read_text())
    assert first.role_of(written["admin"]) is Role.ADMIN
    # Named, so the audit log says who acted.
    admin = first.caller_of(written["admin"])
    assert admin is not None and admin.name == "dev-admin"
    again = load_tokens(SchedulerSettings(listen="localhost:50051", dev_tokens_file=str(path)))
    assert again.role_of(written["runtime"]) is Role.RUNTIME  # the same tokens after a restart
    with pytest.raises(ConfigurationError, match="without tokens"):
        load_tokens(SchedulerSettings(listen="0.0.0.0:50051", dev_tokens_file=str(path)))
    assert is_loopback("[::1]:1") and not is_loopback("10.0.0.1:1")


def _certificate(
    name: str, issuer_key: Any, issuer: x509.Name | None, *, ca: bool
) -> tuple[Any, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer or subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False
        )
    return key, builder.sign(issuer_key or key, hashes.SHA256())


def _pem(key: Any, cert: x509.Certificate) -> tuple[bytes, bytes]:
    return (
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        cert.public_bytes(serialization.Encoding.PEM),
    )


@pytest.mark.mysql
async def test_mutual_tls(
    mysql_url: str, start_scheduler: SchedulerFactory, tmp_path: Path
) -> None:
    ca_key, ca_cert = _certificate("aijob-test-ca", None, None, ca=True)
    server_key, server_cert = _certificate("localhost", ca_key, ca_cert.subject, ca=False)
    client_key, client_cert = _certificate("runtime-1", ca_key, ca_cert.subject, ca=False)
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    key_pem, cert_pem = _pem(server_key, server_cert)
    (tmp_path / "server.key").write_bytes(key_pem)
    (tmp_path / "server.crt").write_bytes(cert_pem)
    (tmp_path / "ca.crt").write_bytes(ca_pem)
    scheduler = await start_scheduler(
        mysql_url,
        listen="localhost:0",
        tls_cert=str(tmp_path / "server.crt"),
        tls_key=str(tmp_path / "server.key"),
        tls_client_ca=str(tmp_path / "ca.crt"),
    )
    port = scheduler.address.rsplit(":", 1)[1]
    client_key_pem, client_cert_pem = _pem(client_key, client_cert)
    with_cert = grpc.ssl_channel_credentials(ca_pem, client_key_pem, client_cert_pem)
    async with grpc.aio.secure_channel(f"localhost:{port}", with_cert) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=10
        )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    without_cert = grpc.ssl_channel_credentials(ca_pem)
    async with grpc.aio.secure_channel(f"localhost:{port}", without_cert) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=10
            )
        assert refused.value.code() is grpc.StatusCode.UNAVAILABLE

"""The grpc.aio server: the three services, server reflection and grpc.health.v1."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Sequence
from pathlib import Path

import grpc
from grpc_health.v1 import _async as health_aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc
from prometheus_client import start_http_server

from scheduler_service.api.admin_servicer import AdminServicer
from scheduler_service.api.admin_views import AdminUseCases
from scheduler_service.api.audit_interceptor import AuditInterceptor
from scheduler_service.api.auth import AuthInterceptor
from scheduler_service.api.capacity import CapacityInterceptor
from scheduler_service.api.reflection import DocumentedReflection, TokenBucket
from scheduler_service.api.runtime_servicer import RuntimeServicer
from scheduler_service.api.servicers import Hubs, JobMessages, JobServicer
from scheduler_service.api.status import StatusInterceptor
from scheduler_service.api.tokens import load_tokens
from scheduler_service.core.errors import ConfigurationError
from scheduler_service.wiring.app import SchedulerApp
from scheduler_service.wiring.settings import SchedulerSettings
from shared.gen.aijob.v1 import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    job_service_pb2,
    job_service_pb2_grpc,
    runtime_service_pb2,
    runtime_service_pb2_grpc,
)

__all__ = ["SERVICE_NAMES", "build_server", "serve"]

log = logging.getLogger(__name__)

SERVICE_NAMES: tuple[str, ...] = (
    job_service_pb2.DESCRIPTOR.services_by_name["JobService"].full_name,
    admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name,
    runtime_service_pb2.DESCRIPTOR.services_by_name["RuntimeService"].full_name,
)


def build_server(
    settings: SchedulerSettings, app: SchedulerApp
) -> tuple[grpc.aio.Server, health_aio.HealthServicer, int]:
    """A server bound to ``settings.listen`` with every service added; returns the bound port."""
    audit = AuditInterceptor(app.audit_log)
    server = grpc.aio.server(
        interceptors=[
            StatusInterceptor(),
            AuthInterceptor(
                load_tokens(settings),
                reflection=settings.reflection,
                owners=app.owners,
                audit=audit.refused,
            ),
            CapacityInterceptor(
                authenticated=settings.streams.max_concurrent_rpcs,
                anonymous=settings.streams.max_anonymous_rpcs,
            ),
            audit,
        ],
        options=_server_options(settings),
    )
    _add_servicers(server, app)

    health_servicer = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)

    reflected: Sequence[str] = (*SERVICE_NAMES, health.SERVICE_NAME)
    if settings.reflection:
        names = (*reflected, reflection.SERVICE_NAME)
        bucket = TokenBucket(settings.reflection_rate_per_s, settings.reflection_burst)
        reflection_pb2_grpc.add_ServerReflectionServicer_to_server(
            DocumentedReflection(names, bucket=bucket), server
        )

    async def database_health(healthy: bool) -> None:
        serving = health_pb2.HealthCheckResponse.SERVING
        await _set_serving(
            health_servicer, serving if healthy else health_pb2.HealthCheckResponse.NOT_SERVING
        )

    app.on_health = database_health
    port = _listen(server, settings)
    return server, health_servicer, port


#: The shortest ping interval without data the server accepts from a client.
KEEPALIVE_FLOOR_MS = 4_000


def _server_options(settings: SchedulerSettings) -> list[tuple[str, int]]:
    """Limits set on purpose (reliability S25): message sizes, streams per connection, and
    keepalive that finds dead runtimes in about a minute while refusing ping floods."""
    return [
        ("grpc.max_receive_message_length", settings.limits.max_receive_message_bytes),
        ("grpc.max_send_message_length", settings.limits.max_receive_message_bytes),
        ("grpc.max_concurrent_streams", settings.streams.max_concurrent_streams),
        # Off unless AIJOB_WORKERS shares the address on purpose: gRPC's default would let a
        # second scheduler bind a busy address silently and take half its calls.
        ("grpc.so_reuseport", 1 if settings.reuse_port else 0),
        ("grpc.keepalive_time_ms", 60_000),
        ("grpc.keepalive_timeout_ms", 20_000),
        ("grpc.keepalive_permit_without_calls", 1),
        # Clients' keepalive pings every 5 s or more are welcome, idle streams included:
        # grpc-js lets callers pick any keepaliveTimeMs and 5-10 s is common; grpc-go and
        # grpc-java hold their own floor at 10 s. Faster than 4 s twice is a flood: GOAWAY.
        # (GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS is this name, "recv" or not.)
        ("grpc.http2.min_ping_interval_without_data_ms", KEEPALIVE_FLOOR_MS),
        ("grpc.http2.max_ping_strikes", 2),
    ]


def _listen(server: grpc.aio.Server, settings: SchedulerSettings) -> int:
    tls = settings.tls
    if tls.enabled:
        client_ca = Path(tls.client_ca).read_bytes() if tls.client_ca else None
        credentials = grpc.ssl_server_credentials(
            [(Path(tls.key).read_bytes(), Path(tls.cert).read_bytes())],
            root_certificates=client_ca,
            require_client_auth=client_ca is not None,
        )
    try:
        if tls.enabled:
            port = server.add_secure_port(settings.listen, credentials)
        else:
            port = server.add_insecure_port(settings.listen)
    except RuntimeError:  # grpc's "Failed to bind to address"
        port = 0
    if port == 0:
        raise ConfigurationError(
            f"cannot listen on {settings.listen}: the address is in use or not this host's"
        )
    return port


async def _set_serving(health_servicer: health_aio.HealthServicer, status: int) -> None:
    for name in ("", *SERVICE_NAMES):
        await health_servicer.set(name, status)


async def serve(settings: SchedulerSettings) -> None:
    """Serve until SIGTERM or SIGINT, then stop gracefully within ``shutdown_grace_s``."""
    # Handled from the start: health answers SERVING before the app's loops have started, and a
    # SIGTERM in between must stop the process gracefully, not kill it with the default action.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    app = SchedulerApp.create(settings)
    server, health_servicer, port = build_server(settings, app)

    if settings.metrics.listen:
        host, _, metrics_port = settings.metrics.listen.rpartition(":")
        start_http_server(int(metrics_port), addr=host or "127.0.0.1")
    await server.start()
    await _set_serving(health_servicer, health_pb2.HealthCheckResponse.SERVING)
    await app.start()
    log.info(
        "scheduler serving", extra={"action": "serve", "listen": settings.listen, "port": port}
    )
    await stop.wait()

    log.info("scheduler stopping", extra={"action": "shutdown"})
    # Load balancers and runtimes see NOT_SERVING first, then in-flight RPCs get the grace period.
    await _set_serving(health_servicer, health_pb2.HealthCheckResponse.NOT_SERVING)
    app.polls.shut_down()  # idle Poll streams would hold the stop for the whole grace period
    await server.stop(settings.shutdown_grace_s)
    await app.stop()


def _add_servicers(server: grpc.aio.Server, app: SchedulerApp) -> None:
    """Each service's servicer, given the use cases it calls."""
    messages = JobMessages(lambda: app.cheap_hours, app.db_clock.now)
    jobs = JobServicer(
        app.jobs,
        app.credentials,
        Hubs(app.watch_hub, app.output_hub, app.event_hub),
        messages=messages,
        registry=app.registry,
        uow=app.uow,
        streams=app.settings.streams,
    )
    admin = AdminServicer(
        AdminUseCases(
            jobs=app.jobs,
            registry=app.registry,
            model_keys=app.model_keys,
            model_routes=app.model_routes,
            billing=app.billing,
            audit_log=app.audit_log,
            credentials=app.credentials,
            legacy=app.legacy,
            outbox=app.outbox,
            uow=app.uow,
            cheap_hours=lambda: app.cheap_hours,
        ),
        messages,
    )
    runtime = RuntimeServicer(app.polls, app.runtime, app.credentials)
    job_service_pb2_grpc.add_JobServiceServicer_to_server(jobs, server)
    admin_service_pb2_grpc.add_AdminServiceServicer_to_server(admin, server)
    runtime_service_pb2_grpc.add_RuntimeServiceServicer_to_server(runtime, server)

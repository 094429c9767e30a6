"""Which runtime instances the caller of this RPC may speak for (issue 15).

A runtime token can be bound to an instance-id prefix (``AIJOB_RUNTIME_IDENTITIES``). The auth
interceptor binds the prefix for the call; every runtime request names its instance id, and
:func:`check_instance` refuses one outside the prefix, so one runtime's token cannot act as
another. Unbound tokens (and internal callers) speak for any instance; their leases are still
guarded by the server-issued lease token.
"""

from __future__ import annotations

from contextvars import ContextVar

from scheduler_service.errors import RuntimeIdentityError

__all__ = ["bind", "check_instance"]

_PREFIX: ContextVar[str | None] = ContextVar("aijob_runtime_prefix", default=None)


def bind(prefix: str) -> None:
    """From here on, the current call (its task, and tasks it starts) speaks only for instance
    ids starting with ``prefix``."""
    _PREFIX.set(prefix)


def check_instance(instance_id: str) -> None:
    prefix = _PREFIX.get()
    if prefix is not None and not instance_id.startswith(prefix):
        raise RuntimeIdentityError(
            f"this runtime token may only act for instance ids starting with {prefix!r}"
        )

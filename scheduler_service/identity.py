"""Who the caller of this RPC is, as far as the runtime protocol cares (issue 15).

The auth interceptor binds every authenticated call to its token: a short digest that counts what
one token holds open (Poll, WatchJob and SubscribeEvents streams), and, for a runtime token bound to
an identity (``AIJOB_RUNTIME_IDENTITIES``), the instance-id
prefix it may act for. Every runtime request names its instance id, and :func:`check_instance`
refuses one outside the prefix, so one runtime's token cannot act as another. Unbound tokens (and
internal callers) speak for any instance; their leases are still guarded by the server-issued
lease token.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from scheduler_service.errors import RuntimeIdentityError

__all__ = ["BoundCaller", "bind", "check_instance", "current"]


@dataclass(frozen=True, slots=True)
class BoundCaller:
    #: A digest of the runtime token (never the token).
    token_key: str
    #: The instance-id prefix the token is bound to, if any.
    instance_prefix: str | None = None


_CALLER: ContextVar[BoundCaller | None] = ContextVar("aijob_runtime_caller", default=None)


def bind(caller: BoundCaller) -> None:
    """From here on, the current call (its task, and tasks it starts) is ``caller``'s."""
    _CALLER.set(caller)


def current() -> BoundCaller | None:
    return _CALLER.get()


def check_instance(instance_id: str) -> None:
    caller = _CALLER.get()
    prefix = None if caller is None else caller.instance_prefix
    if prefix is not None and not instance_id.startswith(prefix):
        raise RuntimeIdentityError(
            f"this runtime token may only act for instance ids starting with {prefix!r}"
        )

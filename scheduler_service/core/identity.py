"""Who the caller of this RPC is, as far as the runtime protocol cares.

The auth interceptor binds every authenticated call to its token: a short digest that counts what
one token holds open (Poll, WatchJob and SubscribeEvents streams), and, for a runtime token bound to
an identity (``AIJOB_RUNTIME_IDENTITIES``), the instance-id
prefix it may act for. Every runtime request names its instance id, and :func:`check_instance`
refuses one outside the prefix, so one runtime's token cannot act as another. Unbound tokens (and
internal callers) speak for any instance; their leases are still guarded by the server-issued
lease token.

An instance id belongs to the token that first subscribed a Poll stream with it
(:class:`InstanceOwners`, per replica): another token naming it is refused on every runtime call,
so no token can collect another runtime's strikes, hold its leases or pose as it.
"""

from __future__ import annotations

from collections import OrderedDict
from contextvars import ContextVar
from dataclasses import dataclass

from scheduler_service.core.errors import RuntimeIdentityError

__all__ = ["BoundCaller", "InstanceOwners", "bind", "check_instance", "claim_instance", "current"]

#: Instance ids whose owner is remembered per replica (the least recently seen are forgotten).
MAX_OWNED_INSTANCES = 100_000


class InstanceOwners:
    """Which token owns each runtime instance id: the first to subscribe a Poll stream with it."""

    def __init__(self, capacity: int = MAX_OWNED_INSTANCES) -> None:
        self._owners: OrderedDict[str, str] = OrderedDict()
        self._capacity = capacity

    def claim(self, instance_id: str, token_key: str) -> None:
        """``token_key`` subscribes as ``instance_id``: it owns it from now on, unless another
        token already does."""
        self.check(instance_id, token_key)
        self._owners[instance_id] = token_key
        self._owners.move_to_end(instance_id)
        while len(self._owners) > self._capacity:
            self._owners.popitem(last=False)

    def check(self, instance_id: str, token_key: str) -> None:
        owner = self._owners.get(instance_id)
        if owner is not None and owner != token_key:
            raise RuntimeIdentityError("this runtime instance id belongs to another runtime token")


@dataclass(frozen=True, slots=True)
class BoundCaller:
    #: A digest of the runtime token (never the token).
    token_key: str
    #: The instance-id prefix the token is bound to, if any.
    instance_prefix: str | None = None
    #: This replica's instance-id owners (None: ownership is not checked).
    owners: InstanceOwners | None = None
    #: The token's name (the audit log's actor) and role.
    name: str = ""
    role: str = ""


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
    if caller is not None and caller.owners is not None:
        caller.owners.check(instance_id, caller.token_key)


def claim_instance(instance_id: str) -> None:
    """The current caller subscribes as ``instance_id`` (already checked by
    :func:`check_instance`): its token owns the id from now on."""
    caller = _CALLER.get()
    if caller is not None and caller.owners is not None:
        caller.owners.claim(instance_id, caller.token_key)

"""Who may run jobs on users' own model keys and read those keys.

With ``AIJOB_USER_KEY_RUNTIMES`` set, a runtime qualifies by its token, not by its name: the
token must be bound (``AIJOB_RUNTIME_IDENTITIES``) to an instance-id prefix inside one of the
fleet's prefixes. An unbound token may call itself anything, so an instance id with the fleet's
prefix proves nothing. Unary calls are judged by their caller; a claim, made by the dispatcher
outside any call, by what the instance's Poll stream was when it subscribed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from scheduler_service.core import identity

__all__ = ["UserKeyRights"]


class UserKeyRights:
    def __init__(self, fleet: Sequence[str] = ()) -> None:
        #: Instance-id prefixes of the runtimes allowed user keys; empty allows every runtime.
        self._fleet = tuple(fleet)
        #: Per instance id, whether its latest Poll stream's token qualified.
        self._streams: OrderedDict[str, bool] = OrderedDict()

    def for_claim(self, runtime_instance_id: str) -> bool:
        """For a claim (no caller in sight): as the token of the instance's stream was."""
        return not self._fleet or self._streams.get(runtime_instance_id, False)

    def for_caller(self, runtime_instance_id: str) -> bool:
        """Whether the current caller may act on user keys as ``runtime_instance_id``."""
        if not self._fleet:
            return True
        if not runtime_instance_id.startswith(self._fleet):
            return False
        caller = identity.current()
        if caller is None:
            return True  # an in-process call, not a runtime's
        return caller.instance_prefix is not None and caller.instance_prefix.startswith(self._fleet)

    def stream_subscribed(self, runtime_instance_id: str) -> None:
        """Called in the Poll stream's own context: what its token may claim from now on."""
        self._streams[runtime_instance_id] = self.for_caller(runtime_instance_id)
        self._streams.move_to_end(runtime_instance_id)
        while len(self._streams) > identity.MAX_OWNED_INSTANCES:
            self._streams.popitem(last=False)

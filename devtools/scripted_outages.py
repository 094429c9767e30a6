"""The scripted model's outages: every request for one model (or for one model on one API key)
gets the same fault for a span of time, as a provider's bad hour or an unpaid account does."""

from __future__ import annotations

import math
import threading
import time

__all__ = ["Outages"]


class Outages:
    """Outages by (model, API key); an outage on the empty key covers every key of its model."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: (model, API key) -> the fault and until when (monotonic).
        self._faults: dict[tuple[str, str], tuple[str, float]] = {}

    def start(self, model: str, fault: str, seconds: float, api_key: str = "") -> None:
        """Every request for ``model`` (on ``api_key``, when given) gets ``fault`` for
        ``seconds``; 0 ends the outage."""
        with self._lock:
            if seconds <= 0:
                self._faults.pop((model, api_key), None)
            else:
                self._faults[(model, api_key)] = (fault, time.monotonic() + seconds)

    def fault(self, model: str, api_key: str) -> str:
        """The fault of an outage covering this request now, or empty. ``hang`` becomes
        ``hang:MS``: the call stays silent until the outage ends."""
        with self._lock:
            for scope in ((model, api_key), (model, "")):
                fault, until = self._faults.get(scope, ("", 0.0))
                left = until - time.monotonic()
                if fault and left > 0:
                    return f"hang:{math.ceil(left * 1000)}" if fault == "hang" else fault
        return ""

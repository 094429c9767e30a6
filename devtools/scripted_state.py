"""The scripted model's state: the limits it enforces (per key, per account, per ``user_id``),
the calls in progress and held, the faults queued, and the counts ``GET /control/stats`` shows."""

from __future__ import annotations

import math
import re
import threading
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

from devtools.scripted_cache import ContextCache
from devtools.scripted_limits import KeyLimits, ProviderLimits
from devtools.scripted_outages import Outages

__all__ = ["USER_ID", "AccountLimits", "Overload", "ScriptedState", "key_label"]

_MARKER = re.compile(r"scripted-fault=([\w:]+)")


def key_label(api_key: str) -> str:
    """How a key appears in the stats: its first 6 and last 4 characters, as dashboards show."""
    return f"{api_key[:6]}...{api_key[-4:]}" if len(api_key) > 12 else "short-key"


@dataclass(frozen=True, slots=True)
class AccountLimits:
    """DeepSeek's limits today (*Rate Limit & Isolation*): calls at once per account, across
    every API key, and, for accounts with raised quotas, per ``user_id`` (a request without one
    counts as the empty id). 0 is no limit; beyond a limit, HTTP 429."""

    concurrency: int = 0
    per_user: int = 0


#: DeepSeek's ``user_id``: letters, digits, ``_`` and ``-``, at most 512 bytes.
USER_ID = re.compile(r"^[A-Za-z0-9_-]{1,512}$")


@dataclass(frozen=True, slots=True)
class Overload:
    """Hold calls past ``places`` in progress; a hold longer than ``hold_s`` ends in a 503."""

    places: int
    hold_s: float = 30.0
    keepalive_s: float = 1.0


class ScriptedState:
    def __init__(
        self,
        default_fault: str,
        limits: KeyLimits | None = None,
        overload: Overload | None = None,
        account: AccountLimits | None = None,
    ) -> None:
        self.default_fault = default_fault
        self.account = account or AccountLimits()
        #: Calls at once on the account, and per user id (the empty id too).
        self.account_in_progress = 0
        self.user_in_progress: Counter[str] = Counter()
        #: Every user_id seen, with how many calls carried it.
        self.user_ids: Counter[str] = Counter()
        self.queued: deque[str] = deque()
        self.counts: Counter[str] = Counter()
        #: Completion tokens each call wrote (a call cut short counts what it sent).
        self.call_completion_tokens: list[int] = []
        self.lock = threading.Lock()
        self.places = threading.Condition(self.lock)
        #: What the ``gate`` fault waits for.
        self.gate = threading.Event()
        self.limits = ProviderLimits(limits or KeyLimits())
        self.overload = overload
        self.in_progress = 0
        #: Calls held open right now, waiting for a place.
        self.holding = 0
        #: The context cache, per user_id (DeepSeek's rule: devtools/scripted_cache.py).
        self.cache = ContextCache()
        #: Each request's prompt and effort ("": thinking off), in arrival order.
        self.prompts: list[str] = []
        self.efforts: list[str] = []
        self.keys: dict[str, Counter[str]] = {}
        self.outages = Outages()

    def enter_account(self, user_id: str) -> bool:
        """Take a place on the account (and the user id's); False past either limit."""
        with self.lock:
            account = self.account
            if account.concurrency and self.account_in_progress >= account.concurrency:
                return False
            if account.per_user and self.user_in_progress[user_id] >= account.per_user:
                return False
            self.account_in_progress += 1
            self.user_in_progress[user_id] += 1
            self.counts["max_account_concurrent"] = max(
                self.counts["max_account_concurrent"], self.account_in_progress
            )
            most = max(self.counts["max_user_concurrent"], self.user_in_progress[user_id])
            self.counts["max_user_concurrent"] = most
            return True

    def leave_account(self, user_id: str) -> None:
        with self.lock:
            self.account_in_progress -= 1
            self.user_in_progress[user_id] -= 1

    def saw_user_id(self, user_id: str) -> None:
        with self.lock:
            self.user_ids[user_id] += 1

    def must_hold(self) -> bool:
        with self.lock:
            return self.overload is not None and self.in_progress >= self.overload.places

    def hold(self) -> None:
        """A call is held open until a place frees."""
        with self.lock:
            self.counts["held"] += 1
            self.holding += 1
            self._note_open()

    def take_place(self, key: str, wait_s: float) -> bool:
        """Start ``key``'s held call if a place is free within ``wait_s``."""
        assert self.overload is not None
        with self.places:
            if self.in_progress >= self.overload.places:
                self.places.wait(timeout=wait_s)
            if self.in_progress >= self.overload.places:
                return False
            self.holding -= 1
            self._start(key)
            return True

    def release_hold(self, *, overloaded: bool) -> None:
        """A held call ends without a place: held too long (``overloaded``), or its caller left."""
        with self.lock:
            self.holding -= 1
            self.counts["overloaded" if overloaded else "abandoned"] += 1

    def _note_open(self) -> None:
        open_calls = self.in_progress + self.holding
        self.counts["max_open"] = max(self.counts["max_open"], open_calls)

    def started(self, key: str) -> None:
        with self.lock:
            self._start(key)

    def _start(self, key: str) -> None:
        """A call starts (the caller holds the lock)."""
        self.in_progress += 1
        self.counts["max_concurrent"] = max(self.counts["max_concurrent"], self.in_progress)
        self._note_open()
        per_key = self.keys.setdefault(key_label(key), Counter())
        per_key["requests"] += 1
        per_key["in_progress"] += 1
        per_key["max_concurrent"] = max(per_key["max_concurrent"], per_key["in_progress"])

    def ended(self, key: str) -> None:
        with self.places:
            self.in_progress -= 1
            self.keys[key_label(key)]["in_progress"] -= 1
            self.places.notify()

    def wrote(self, chars: int) -> None:
        """A call ended having written ``chars`` characters of completion."""
        tokens = math.ceil(chars / 4)
        with self.lock:
            self.counts["completion_tokens"] += tokens
            self.call_completion_tokens.append(tokens)

    def count(self, name: str) -> None:
        with self.lock:
            self.counts[name] += 1

    def rate_limited(self, key: str, *, admitted: bool) -> None:
        """A 429 answered: by the limits (not admitted) or by a scripted fault (admitted)."""
        with self.lock:
            self.counts["rate_limited"] += 1
            per_key = self.keys.setdefault(key_label(key), Counter())
            per_key["requests"] += 0 if admitted else 1
            per_key["rate_limited"] += 1

    def stats(self) -> dict[str, Any]:
        with self.lock:
            stats: dict[str, Any] = {"requests": 0, "rate_limited": 0, "max_concurrent": 0}
            stats |= dict(self.counts)
            stats["in_progress"] = self.in_progress
            stats["holding"] = self.holding
            stats["keys"] = {label: dict(counts) for label, counts in self.keys.items()}
            stats["user_ids"] = dict(self.user_ids)
            stats["call_completion_tokens"] = list(self.call_completion_tokens)
            return stats

    def saw_request(self, prompt: str, effort: str) -> None:
        with self.lock:
            self.prompts.append(prompt)
            self.efforts.append(effort)
            self.counts[f"thinking:{effort or 'off'}"] += 1

    def next_fault(self, prompt: str, model: str = "", api_key: str = "") -> str:
        marker = _MARKER.search(prompt)
        outage = self.outages.fault(model, api_key)
        with self.lock:
            self.counts[f"model:{model}"] += 1
            if marker:
                fault = marker.group(1)
            elif outage:
                self.counts[f"outage:{model}"] += 1
                fault = outage
            elif self.queued:
                fault = self.queued.popleft()
            else:
                fault = self.default_fault
            self.counts["requests"] += 1
            self.counts[f"fault:{fault or 'none'}"] += 1
            return fault

"""The scripted model's context cache, by DeepSeek's rule since V4 (api-docs, *Context
Caching*): a hit needs a full match of a stored prefix unit; units are stored at the end of
each request's input and of its input and output, at the common prefixes the service detects
across recent requests, and every ``INTERVAL_CHARS`` inside long texts. Each ``user_id`` has a
cache of its own (a request without one shares the anonymous cache). Text stands in for tokens
(four characters a token); hits count in whole 64-token blocks."""

from __future__ import annotations

import hashlib
import threading
from collections import deque

__all__ = ["CACHE_BLOCK", "INTERVAL_CHARS", "ContextCache", "hit_tokens"]

#: Providers cache prompt prefixes in blocks of this many tokens (DeepSeek: 64).
CACHE_BLOCK = 64
#: A unit is stored every this many characters of a long input (about 1,024 tokens).
INTERVAL_CHARS = 4 * 1024
#: A common prefix with a recent request shorter than this is not worth a unit.
MIN_COMMON_CHARS = 4 * CACHE_BLOCK
#: How many recent inputs per user the service compares a new one with.
RECENT = 32


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def _common_prefix(first: str, second: str) -> int:
    limit = min(len(first), len(second))
    index = 0
    while index < limit and first[index] == second[index]:
        index += 1
    return index


class ContextCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: Per user: unit length in characters -> digests of the units of that length.
        self._units: dict[str, dict[int, set[bytes]]] = {}
        self._recent: dict[str, deque[str]] = {}

    def hit_chars(self, user: str, prompt: str) -> int:
        """How much of ``prompt`` a stored unit of ``user``'s covers (its longest full match)."""
        with self._lock:
            units = self._units.get(user, {})
            for length in sorted(units, reverse=True):
                if length <= len(prompt) and _digest(prompt[:length]) in units[length]:
                    return length
        return 0

    def store(self, user: str, prompt: str, output: str) -> None:
        """The units a request leaves: its input, its input and output, every interval of its
        input, and its common prefixes with the user's recent inputs."""
        with self._lock:
            units = self._units.setdefault(user, {})
            recent = self._recent.setdefault(user, deque(maxlen=RECENT))
            ends = [len(prompt), *range(INTERVAL_CHARS, len(prompt), INTERVAL_CHARS)]
            ends += [
                common
                for earlier in recent
                if (common := _common_prefix(earlier, prompt)) >= MIN_COMMON_CHARS
            ]
            for end in ends:
                units.setdefault(end, set()).add(_digest(prompt[:end]))
            whole = prompt + output
            units.setdefault(len(whole), set()).add(_digest(whole))
            recent.append(prompt)


def hit_tokens(hit_chars: int, prompt_tokens: int) -> int:
    """A hit of ``hit_chars`` characters in whole cache blocks, at most the prompt's tokens."""
    return min(prompt_tokens, hit_chars // 4) // CACHE_BLOCK * CACHE_BLOCK

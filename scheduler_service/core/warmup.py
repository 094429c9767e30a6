"""Warm before fan-out: jobs whose prompts start with the same snapshot (a user's analyses over
one snapshot, a tree's children) share that prefix at the provider's cache, but only once a call
carrying it has been answered. The first of them goes at once; the others wait until its first
token arrives (the prefix is then stored), and never longer than the warm-up bound. Pure.

A job takes part when its prompt layout puts the snapshot first (prompt v2), its snapshot is long
enough for the provider to store a unit inside it (DeepSeek stores one every 1,024 tokens or so
of a long input), and its create did not ask for ``IMMEDIATE``."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scheduler_service.core.records import NewJob

__all__ = ["SNAPSHOT_FIRST_LAYOUTS", "WARM_FOR_S", "WarmupPolicy", "followers", "prefix_key"]

#: The prompt versions whose messages start with the snapshot (shared/job_types/spec.py).
SNAPSHOT_FIRST_LAYOUTS = frozenset({"v2"})
#: How long a prefix stays warm once a first token was told for it: the provider keeps a unit
#: for hours; past this, a new burst over the same snapshot warms it again.
WARM_FOR_S = 3600.0


@dataclass(frozen=True, slots=True)
class WarmupPolicy:
    #: The longest a job waits for its prefix to warm (0: no warm-up).
    wait_s: float = 2.0
    #: Snapshots shorter than this (canonical JSON bytes) hold no unit the cache would store.
    min_snapshot_bytes: int = 4096


def prefix_key(
    policy: WarmupPolicy,
    prompt_version: str | None,
    canonical_snapshot: bytes,
    explicit_immediate: bool,
) -> str | None:
    """The digest a job's prompt prefix is known by, or None when it waits for no warm-up."""
    if (
        policy.wait_s <= 0
        or explicit_immediate
        or prompt_version not in SNAPSHOT_FIRST_LAYOUTS
        or len(canonical_snapshot) < policy.min_snapshot_bytes
    ):
        return None
    return hashlib.sha256(canonical_snapshot).hexdigest()[:32]


def followers(
    jobs: Sequence[NewJob],
    warming: Iterable[tuple[str, str]],
    warm: Iterable[tuple[str, str]] = (),
) -> list[str]:
    """Of new ``jobs`` (in their order), those that wait for a prefix to warm: none of a
    (user, prefix) already ``warm`` (a first token was told for it); every job of one already
    ``warming`` (a job of it created within the bound, queued or running, no first token told
    yet); else every one but the first of that (user, prefix) among them."""
    led = set(warming)
    done = set(warm)
    waiting: list[str] = []
    for job in jobs:
        if job.prefix_key is None:
            continue
        group = (job.user_id, job.prefix_key)
        if group in done:
            continue
        if group in led:
            waiting.append(job.job_id)
        else:
            led.add(group)
    return waiting

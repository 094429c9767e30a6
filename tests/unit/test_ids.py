"""Job ids: UUIDv7, strictly increasing within a process, accepted by the id check."""

from __future__ import annotations

import uuid

from scheduler_service.core.ids import is_valid_job_id, new_id


def test_ids_are_uuid7_and_increase() -> None:
    ids = [new_id() for _ in range(5_000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    parsed = uuid.UUID(ids[0])
    assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)
    assert all(is_valid_job_id(i) for i in ids[:10])


def test_the_id_check_takes_legacy_ids_and_refuses_junk() -> None:
    assert is_valid_job_id("legacy-01") and is_valid_job_id("ckx1y2z3")
    for bad in ("", " x", "a/b", "x" * 192, "../etc", "a b", "é"):
        assert not is_valid_job_id(bad)

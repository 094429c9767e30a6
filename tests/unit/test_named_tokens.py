"""Named tokens: ``name=token`` in a token setting names the token for the audit log;
an unnamed token keeps working, and a token that merely contains ``=`` (base64 padding) is not
read as named."""

from __future__ import annotations

import pytest

from scheduler_service.api.auth import Role, TokenSet
from shared.config import named_token as named


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("ops-alice=alice-admin-token-0123456789", ("ops-alice", "alice-admin-token-0123456789")),
        ("plain-token-without-a-name-000", ("", "plain-token-without-a-name-000")),
        ("c2VjcmV0LXRva2VuLWJ5dGVz==", ("", "c2VjcmV0LXRva2VuLWJ5dGVz==")),
        ("Upper=alice-admin-token-0123456789", ("", "Upper=alice-admin-token-0123456789")),
        ("short=too-short", ("", "short=too-short")),
    ],
)
def test_a_token_is_named_only_as_name_equals_a_long_token(
    entry: str, expected: tuple[str, str]
) -> None:
    assert named(entry) == expected


def test_a_named_token_authenticates_by_its_token_alone_and_carries_its_name() -> None:
    tokens = TokenSet({Role.ADMIN: ["ops-alice=alice-admin-token-0123456789", "unnamed-token-xyz"]})
    alice = tokens.caller_of("alice-admin-token-0123456789")
    assert alice is not None and (alice.role, alice.name) == (Role.ADMIN, "ops-alice")
    assert tokens.caller_of("ops-alice=alice-admin-token-0123456789") is None
    other = tokens.caller_of("unnamed-token-xyz")
    assert other is not None and other.name.startswith("token-")
    assert "unnamed" not in other.name

"""The secret DeepSeek's user_id pseudonyms are made under is long enough not to be guessed."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from scheduler_service.core.provider_ids import MIN_PROVIDER_USER_ID_KEY_BYTES
from scheduler_service.wiring.settings import SchedulerSettings


@pytest.mark.parametrize("key", ["k", "x" * (MIN_PROVIDER_USER_ID_KEY_BYTES - 1)])
def test_a_short_key_is_refused_naming_the_minimum(
    key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIJOB_PROVIDER_USER_ID_KEY", key)
    with pytest.raises(ValidationError, match=f"at least {MIN_PROVIDER_USER_ID_KEY_BYTES} bytes"):
        SchedulerSettings()


def test_a_long_key_pseudonymises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIJOB_PROVIDER_USER_ID_KEY", "x" * MIN_PROVIDER_USER_ID_KEY_BYTES)
    ids = SchedulerSettings().provider_user_ids
    assert ids.enabled and ids.of("learner-1") != "learner-1"


def test_no_key_sends_no_user_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIJOB_PROVIDER_USER_ID_KEY", raising=False)
    assert SchedulerSettings().provider_user_ids.of("learner-1") == ""

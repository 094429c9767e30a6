"""The pure pieces around model routes: AIJOB_MODEL_ROUTES as written, which tiers one job may
take (Router.tiers), an attempt that falls back going back unspent (core/retry_policy.py), and
the runtime's providers from AIJOB_PROVIDER_<NAME>_* (runtime_service/providers.py)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime_service.providers import ProviderConfig, providers_from_env
from scheduler_service.core.job_definitions import Backoff
from scheduler_service.core.retry_policy import RetryDecision, decide
from scheduler_service.core.routes import ModelTier, RouteBook, Router, parse_routes
from shared.error_codes import ErrorCode

PRO = ModelTier("deepseek", "deepseek-v4-pro")
FLASH = ModelTier("deepseek", "deepseek-v4-flash")
BACKUP = ModelTier("backup", "backup-flash")
USER_KEY = "user_deepseek_key"


def test_routes_are_read_as_written() -> None:
    text = (
        " quiz_generation = deepseek/deepseek-v4-pro, backup/backup-flash ;"
        " synthetic_echo=backup/org/model"
    )
    assert parse_routes(text) == {
        "quiz_generation": (PRO, BACKUP),
        "synthetic_echo": (ModelTier("backup", "org/model"),),
    }
    assert parse_routes("") == {}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("quiz_generation", "expected job_type=provider/model"),
        ("quiz_generation=", "names no tier"),
        ("quiz_generation=deepseek", "provider ''"),
        ("quiz_generation=Deep Seek/m", "provider 'Deep Seek'"),
        ("quiz_generation=deepseek/a,deepseek/a", "each tier once"),
        ("q=" + ",".join(f"p/m{n}" for n in range(9)), "at most 8 tiers"),
    ],
)
def test_a_malformed_route_is_refused_saying_why(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_routes(text)


@given(st.lists(st.sampled_from([PRO, FLASH, BACKUP]), min_size=1, max_size=3, unique=True))
def test_a_route_written_out_reads_back(tiers: list[ModelTier]) -> None:
    text = "t=" + ",".join(str(t) for t in tiers)
    assert parse_routes(text) == {"t": tuple(tiers)}


def _router(settings: dict[str, tuple[ModelTier, ...]]) -> Router:
    known = {"quiz_generation": PRO, "synthetic_echo": FLASH}
    return Router(RouteBook(settings, {}), known.get, USER_KEY)


def test_a_job_takes_its_types_route_unless_it_pinned_its_model_or_its_type_is_gone() -> None:
    router = _router({"quiz_generation": (PRO, FLASH, BACKUP)})

    def tiers(job_type: str, *, pinned: bool = False, mode: str = "platform") -> object:
        return router.tiers(job_type, PRO, pinned=pinned, credential_mode=mode)

    assert tiers("quiz_generation") == (PRO, FLASH, BACKUP)
    assert tiers("quiz_generation", pinned=True) == (PRO,)
    assert tiers("retired_type") == (PRO,)
    # A user's key stays with its provider: no backup tier, never a platform key.
    assert tiers("quiz_generation", mode=USER_KEY) == (PRO, FLASH)
    # A type with no route runs on its own model alone.
    assert router.tiers("synthetic_echo", FLASH, pinned=False, credential_mode="platform") == (
        FLASH,
    )


def test_an_operators_route_wins_over_the_settings_and_clearing_it_restores_them() -> None:
    router = _router({"quiz_generation": (PRO, FLASH)})
    operated = router.with_operator({"quiz_generation": (BACKUP, PRO)})
    assert operated.tiers("quiz_generation", PRO, pinned=False, credential_mode="platform") == (
        BACKUP,
        PRO,
    )
    cleared = operated.with_operator({})
    assert cleared.tiers("quiz_generation", PRO, pinned=False, credential_mode="platform") == (
        PRO,
        FLASH,
    )
    assert router.book.reroutes and not _router({}).book.reroutes


def test_a_user_key_job_whose_route_has_no_tier_of_its_provider_keeps_its_model() -> None:
    router = _router({"quiz_generation": (BACKUP,)})
    assert router.tiers("quiz_generation", PRO, pinned=False, credential_mode=USER_KEY) == (PRO,)


@given(
    st.sampled_from(
        [
            ErrorCode.TEMPORARY_PROVIDER_ERROR,
            ErrorCode.NETWORK_ERROR,
            ErrorCode.MODEL_TIMEOUT,
            ErrorCode.MODEL_INSUFFICIENT_BALANCE,
        ]
    ),
    st.integers(min_value=1, max_value=10),
    st.integers(min_value=0, max_value=30),
)
def test_an_attempt_that_falls_back_goes_back_unspent_at_once_up_to_the_cap(
    code: ErrorCode, attempt_no: int, waived: int
) -> None:
    cap = 20

    def decided(falls_back: bool) -> RetryDecision:
        return decide(
            attempt_no=attempt_no + waived,
            max_attempts=3,
            error_code=code,
            retryable=code != ErrorCode.MODEL_INSUFFICIENT_BALANCE,
            retry_after_ms=0,
            backoff=Backoff(base_ms=2_000),
            rng=random.Random(0),
            waived_attempts=waived,
            max_waived_attempts=cap,
            falls_back=falls_back,
        )

    fallen = decided(True)
    if waived < cap:
        assert (fallen.retry, fallen.delay_ms, fallen.waived) == (True, 0, True)
    else:
        assert fallen == decided(False)


def test_providers_are_read_from_their_settings() -> None:
    environ = {
        "AIJOB_PROVIDER_BACKUP_BASE_URL": "http://127.0.0.1:9/v1",
        "AIJOB_PROVIDER_BACKUP_API_KEY": "sk-backup",
        "AIJOB_PROVIDER_NOURL_API_KEY": "sk-orphan",
        "AIJOB_PROVIDER_SECOND_ONE_BASE_URL": "http://127.0.0.1:10/v1",
        "AIJOB_PROVIDER_X": "not a provider setting",
        "PATH": "/usr/bin",
    }
    assert providers_from_env(environ) == {
        "backup": ProviderConfig("http://127.0.0.1:9/v1", "sk-backup"),
        "second_one": ProviderConfig("http://127.0.0.1:10/v1"),
    }
    assert "sk-backup" not in repr(providers_from_env(environ))

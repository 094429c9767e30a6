"""The model providers a runtime calls: DeepSeek (AIJOB_MODEL_BASE_URL and DEEPSEEK_API_KEY) and
any other OpenAI-compatible provider named by ``AIJOB_PROVIDER_<NAME>_BASE_URL`` and
``AIJOB_PROVIDER_<NAME>_API_KEY`` (a model route's fallback tier, core/routes.py in the
scheduler). A lease names its provider; its client is made once and shared, except for a
user's own key, whose client lives for its call."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import openai

from runtime_service.failures import JobFailure
from runtime_service.leases import LeaseInput
from shared.error_codes import ErrorCode
from shared.model_catalogue import DEEPSEEK

__all__ = ["ModelClients", "ProviderConfig", "providers_from_env"]

_SETTING = re.compile(r"AIJOB_PROVIDER_([A-Z0-9_]+)_(BASE_URL|API_KEY)")
USER_KEY_MODE = "user_deepseek_key"
#: The longest a call may take in all, whatever flows.
CALL_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    base_url: str
    api_key: str = field(default="", repr=False)


def providers_from_env(environ: Mapping[str, str]) -> dict[str, ProviderConfig]:
    """The providers the environment names, by lower-case name; one without a base URL is
    none."""
    found: dict[str, dict[str, str]] = {}
    for name, value in environ.items():
        if (match := _SETTING.fullmatch(name)) is not None:
            found.setdefault(match.group(1).lower(), {})[match.group(2)] = value
    return {
        name: ProviderConfig(values["BASE_URL"], values.get("API_KEY", ""))
        for name, values in found.items()
        if values.get("BASE_URL")
    }


class ModelClients:
    """An ``openai.AsyncOpenAI`` per provider for the platform's keys, and one per call on a
    user's own key. ``silence_s`` bounds the wait for any byte of an answer (a connection that
    hangs without a byte is a provider failing, MODEL_TIMEOUT); a held call's keep-alives and a
    streaming answer's tokens are bytes."""

    def __init__(
        self,
        deepseek: ProviderConfig,
        others: Mapping[str, ProviderConfig],
        *,
        silence_s: float = CALL_TIMEOUT_S,
    ) -> None:
        self._providers = {**others, DEEPSEEK: deepseek}
        self._silence_s = silence_s
        self._shared: dict[str, openai.AsyncOpenAI] = {}

    @staticmethod
    def provider_of(lease: LeaseInput) -> str:
        """An empty provider (a scheduler that predates routes) is DeepSeek."""
        return lease.model_provider or DEEPSEEK

    async def for_lease(
        self, lease: LeaseInput, user_key: Callable[[LeaseInput], Awaitable[str]]
    ) -> tuple[openai.AsyncOpenAI, bool]:
        """The client for ``lease``'s call, and whether the caller closes it after."""
        provider = self.provider_of(lease)
        config = self._providers.get(provider)
        if config is None:
            # Another runtime may have it: the breaker of this tier opens and routes elsewhere.
            raise JobFailure(
                ErrorCode.TEMPORARY_PROVIDER_ERROR,
                "The model provider had a temporary error.",
                f"provider {provider!r} is not configured on this runtime "
                f"(AIJOB_PROVIDER_{provider.upper()}_BASE_URL)",
            )
        if lease.credential_mode == USER_KEY_MODE:
            return self._new(config.base_url, await user_key(lease)), True
        if provider not in self._shared:
            self._shared[provider] = self._new(config.base_url, config.api_key or "unused")
        return self._shared[provider], False

    def _new(self, base_url: str, api_key: str) -> openai.AsyncOpenAI:
        # The scheduler is the one retry authority: the SDK must not retry on its own.
        timeout = openai.Timeout(CALL_TIMEOUT_S, read=self._silence_s)
        return openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout
        )

    async def close(self) -> None:
        for client in self._shared.values():
            await client.close()
        self._shared.clear()
